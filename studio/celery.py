"""Celery application for Axiom Studio (workers on Redis when REDIS_URL is set)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")

app = Celery("studio")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _require_secret_key(sender, **kwargs) -> None:
    """A worker without SECRET_KEY (and DEBUG off) refuses to start, like the web process."""
    from studio.checks import require_secret_key

    require_secret_key()
