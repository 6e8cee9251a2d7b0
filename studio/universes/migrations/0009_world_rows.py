"""Universe, UniverseMeta and LoreEntry moved to the world app (issue 34): state only, then the content types.

The universes app's own foreign keys point at the world app's rows and the three models leave
the universes app's state; their tables (`universes_universe`, `universes_universemeta`,
`universes_loreentry`, and the many-to-many `universes_universe_members` and
`universes_loreentry_links`) stay, now the world app's. The content types are relabelled
universes -> world so permissions and admin log entries follow.
"""

import django.db.models.deletion
from django.db import migrations, models

from studio.world.relabel import relabel_content_types


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
        relabel_content_types("universes", "world", ("universe", "universemeta", "loreentry")),
    ]
