"""Save, Event and StateCache moved to the world app (issue 34): state only, then the content types.

The saves app's own foreign keys point at world.Save and the three models leave the saves app's
state; their tables (`saves_save`, `saves_event`, `saves_statecache`) stay, now the world app's.
The content types are relabelled saves -> world so permissions and admin log entries follow.
"""

import django.db.models.deletion
from django.db import migrations, models

from studio.world.relabel import relabel_content_types


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
        relabel_content_types("saves", "world", ("save", "event", "statecache")),
    ]
