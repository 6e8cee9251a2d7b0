"""Save, Event and StateCache moved to the world app (issue 34): state only, then the content types.

The saves app's own foreign keys point at world.Save and the three models leave the saves app's
state; their tables (`saves_save`, `saves_event`, `saves_statecache`) stay, now the world app's.
The content types are relabelled saves -> world so permissions and admin log entries follow.
"""

import django.db.models.deletion
from django.db import migrations, models


MOVED = ["save", "event", "statecache"]  # the model names, as content types store them


def _relabel(apps, schema_editor, old_label, new_label, model_names):
    """Move the content types (and with them permissions and admin log entries) to the new app label.

    A content type already made under the new label (a `migrate` stopped between the world app's
    first migration and this one runs post_migrate, which creates it) is deleted first: it is
    the newer, empty one; the old row carries the permissions and the log entries.
    """
    ContentType = apps.get_model("contenttypes", "ContentType")
    types = ContentType.objects.using(schema_editor.connection.alias)
    for name in model_names:
        old = types.filter(app_label=old_label, model=name).first()
        if old is None:
            continue
        types.filter(app_label=new_label, model=name).delete()
        old.app_label = new_label
        old.save(update_fields=["app_label"])
    from django.contrib.contenttypes.models import ContentType as LiveContentType

    LiveContentType.objects.clear_cache()


def relabel_forwards(apps, schema_editor):
    _relabel(apps, schema_editor, "saves", "world", MOVED)


def relabel_backwards(apps, schema_editor):
    _relabel(apps, schema_editor, "world", "saves", MOVED)


class Migration(migrations.Migration):
    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("memory", "0013_world_rows"),
        ("proxy", "0003_world_rows"),
        ("saves", "0007_event_narrative_md5_index"),
        ("world", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name="save",
                    name="forked_from",
                ),
                migrations.RemoveField(
                    model_name="save",
                    name="universe",
                ),
                migrations.AlterField(
                    model_name="playsettings",
                    name="game_save",
                    field=models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE, related_name="play_settings", to="world.save"
                    ),
                ),
                migrations.AlterField(
                    model_name="narratorsnapshot",
                    name="game_save",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="narrator_snapshots", to="world.save"
                    ),
                ),
                migrations.AlterField(
                    model_name="memorytestresult",
                    name="game_save",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="memory_test_results", to="world.save"
                    ),
                ),
                migrations.RemoveField(
                    model_name="statecache",
                    name="game_save",
                ),
                migrations.AlterField(
                    model_name="narratordraft",
                    name="game_save",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="narrator_drafts", to="world.save"
                    ),
                ),
                migrations.DeleteModel(
                    name="Event",
                ),
                migrations.DeleteModel(
                    name="StateCache",
                ),
                migrations.DeleteModel(
                    name="Save",
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(relabel_forwards, relabel_backwards, elidable=False),
    ]
