"""The memory app's foreign keys to Save and Universe now point at the world app (issue 34): state only,
the columns and their constraints reference the same tables as before.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0012_chapter_level_last_turn_index"),
        ("world", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="chapter",
                    name="game_save",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="chapters", to="world.save"
                    ),
                ),
                migrations.AlterField(
                    model_name="continuityfinding",
                    name="game_save",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="continuity_findings", to="world.save"
                    ),
                ),
                migrations.AlterField(
                    model_name="fact",
                    name="game_save",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="facts", to="world.save"
                    ),
                ),
                migrations.AlterField(
                    model_name="job",
                    name="game_save",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="jobs",
                        to="world.save",
                    ),
                ),
                migrations.AlterField(
                    model_name="job",
                    name="universe",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="jobs",
                        to="world.universe",
                    ),
                ),
                migrations.AlterField(
                    model_name="llmcall",
                    name="game_save",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="llm_calls",
                        to="world.save",
                    ),
                ),
                migrations.AlterField(
                    model_name="loreactivation",
                    name="game_save",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="lore_activations", to="world.save"
                    ),
                ),
                migrations.AlterField(
                    model_name="mentalmodel",
                    name="game_save",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="mental_models", to="world.save"
                    ),
                ),
                migrations.AlterField(
                    model_name="observation",
                    name="game_save",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="observations", to="world.save"
                    ),
                ),
                migrations.AlterField(
                    model_name="presence",
                    name="game_save",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="presence_rows", to="world.save"
                    ),
                ),
                migrations.AlterField(
                    model_name="recordedquery",
                    name="game_save",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="recorded_queries", to="world.save"
                    ),
                ),
                migrations.AlterField(
                    model_name="reveal",
                    name="game_save",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="reveals", to="world.save"
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
