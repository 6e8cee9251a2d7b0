from django.apps import AppConfig


class InspectorConfig(AppConfig):
    name = "studio.inspector"
    verbose_name = "Memory inspector"
