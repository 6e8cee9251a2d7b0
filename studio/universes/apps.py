from django.apps import AppConfig


class UniversesConfig(AppConfig):
    name = "studio.universes"
    verbose_name = "Universes"
