from django.db import migrations, models


class Migration(migrations.Migration):
    """LoreEntry.version: the optimistic-lock counter that lets concurrent edits lose nothing."""

    dependencies = [
        ("universes", "0004_lore_activation_fields"),
    ]

    operations = [
        migrations.AddField(
            model_name="loreentry",
            name="version",
            field=models.PositiveIntegerField(default=1, editable=False),
        ),
    ]
