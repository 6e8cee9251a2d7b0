"""Universe, UniverseMeta and LoreEntry moved to the world app (issue 34): state only, then the content types.

The universes app's own foreign keys point at the world app's rows and the three models leave
the universes app's state; their tables (`universes_universe`, `universes_universemeta`,
`universes_loreentry`, and the many-to-many `universes_universe_members` and
`universes_loreentry_links`) stay, now the world app's. The content types are relabelled
universes -> world so permissions and admin log entries follow.
"""

import django.db.models.deletion
from django.db import migrations, models


MOVED = ["universe", "universemeta", "loreentry"]  # the model names, as content types store them


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
    _relabel(apps, schema_editor, "universes", "world", MOVED)


def relabel_backwards(apps, schema_editor):
    _relabel(apps, schema_editor, "world", "universes", MOVED)


class Migration(migrations.Migration):
    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("memory", "0013_world_rows"),
        ("proxy", "0003_world_rows"),
        ("saves", "0008_world_rows"),
        ("universes", "0008_memory_tests"),
        ("world", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="lorerevision",
                    name="lore_entry",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="revisions",
                        to="world.loreentry",
                    ),
                ),
                migrations.AlterField(
                    model_name="pendinglorelink",
                    name="source",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="pending_links", to="world.loreentry"
                    ),
                ),
                migrations.RemoveField(
                    model_name="universe",
                    name="members",
                ),
                migrations.RemoveField(
                    model_name="universe",
                    name="owner",
                ),
                migrations.AlterField(
                    model_name="pendinglorelink",
                    name="universe",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="pending_lore_links",
                        to="world.universe",
                    ),
                ),
                migrations.AlterField(
                    model_name="memorytest",
                    name="universe",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="memory_tests", to="world.universe"
                    ),
                ),
                migrations.RemoveField(
                    model_name="universemeta",
                    name="universe",
                ),
                migrations.AlterField(
                    model_name="lorerevision",
                    name="universe",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="lore_revisions", to="world.universe"
                    ),
                ),
                migrations.DeleteModel(
                    name="LoreEntry",
                ),
                migrations.DeleteModel(
                    name="UniverseMeta",
                ),
                migrations.DeleteModel(
                    name="Universe",
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(relabel_forwards, relabel_backwards, elidable=False),
    ]
