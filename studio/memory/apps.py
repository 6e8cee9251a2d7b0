from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "studio.memory"
    verbose_name = "Memory"
