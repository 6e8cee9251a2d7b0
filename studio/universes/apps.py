from django.apps import AppConfig


class UniversesConfig(AppConfig):
    name = "studio.universes"
    verbose_name = "Universes"

    def ready(self) -> None:
        from studio import checks  # noqa: F401  (registers the project's system checks)
