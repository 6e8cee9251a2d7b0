"""System checks that make a misconfigured deployment fail at start with a clear message."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Tags, register
from django.core.exceptions import ImproperlyConfigured

SECRET_KEY_MESSAGE = (
    "SECRET_KEY is required when DEBUG is off. Set SECRET_KEY in the environment, or DEBUG=1 for a development machine."
)


def secret_key_configured() -> bool:
    try:
        return bool(settings.SECRET_KEY)
    except ImproperlyConfigured:  # Django refuses to hand out an empty key
        return False


def require_secret_key() -> None:
    """Raise ImproperlyConfigured unless a SECRET_KEY is configured (entry points call this)."""
    if not secret_key_configured():
        raise ImproperlyConfigured(SECRET_KEY_MESSAGE)


@register(Tags.security)
def check_secret_key(app_configs, **kwargs):
    if not secret_key_configured():
        return [Error(SECRET_KEY_MESSAGE, id="axiom.E001")]
    return []
