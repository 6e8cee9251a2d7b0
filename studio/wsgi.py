"""WSGI entry point (gunicorn studio.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
application = get_wsgi_application()

from studio.checks import require_secret_key  # noqa: E402  (settings are ready now)

require_secret_key()
