from django.apps import AppConfig


class SavesConfig(AppConfig):
    name = "studio.saves"
    verbose_name = "Saves"
