"""The proxy app's foreign keys to Save and Universe now point at the world app (issue 34): state only,
the columns and their constraints reference the same tables as before.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("proxy", "0002_proxy_chat_save_per_chat"),
        ("world", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="proxychat",
                    name="game_save",
                    field=models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE, related_name="proxy_chat", to="world.save"
                    ),
                ),
                migrations.AlterField(
                    model_name="proxychat",
                    name="universe",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="proxy_chats", to="world.universe"
                    ),
                ),
                migrations.AlterField(
                    model_name="proxyrequest",
                    name="game_save",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="proxy_requests", to="world.save"
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
