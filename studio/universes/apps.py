from django.apps import AppConfig


class UniversesConfig(AppConfig):
    name = "studio.universes"
    verbose_name = "Universes"

    def ready(self) -> None:
        from studio import checks  # noqa: F401  (registers the project's system checks)
        from studio.memory import timeline
        from studio.universes.models import MemoryTest

        timeline.exempt_model(
            MemoryTest,
            reason="a universe's test definition: its turn says when the test "
            "applies; a save's results are the per-turn rows",
        )
