from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "studio.api"
    verbose_name = "Engine API"
