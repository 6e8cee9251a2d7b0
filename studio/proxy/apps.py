from django.apps import AppConfig


class ProxyConfig(AppConfig):
    name = "studio.proxy"
    verbose_name = "Memory proxy"
