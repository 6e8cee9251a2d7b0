"""Test settings: the real settings module, fed a test environment.

Everything still comes from environment variables (as in production); this only supplies
defaults that make a bare `pytest` work. DATABASE_URL picks SQLite or PostgreSQL.
"""

import os
import tempfile

os.environ.setdefault("SECRET_KEY", "test-secret-key-not-for-production")
os.environ.setdefault("DEBUG", "0")
os.environ.setdefault("SECURE_SSL_REDIRECT", "0")
os.environ.setdefault("SESSION_COOKIE_SECURE", "0")
os.environ.setdefault("CSRF_COOKIE_SECURE", "0")
os.environ.setdefault("ALLOWED_HOSTS", "testserver,localhost,127.0.0.1")
os.environ.setdefault("AXIOM_VAR_DIR", tempfile.mkdtemp(prefix="axiom-test-var-"))
# pytest-xdist workers inherit the controller's environment, hence its var dir: give each
# worker its own (its own embedded Chroma store and SQLite test database), since two
# processes must never open one embedded store.
_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _worker and os.path.basename(os.environ["AXIOM_VAR_DIR"]) != _worker:
    os.environ["AXIOM_VAR_DIR"] = os.path.join(os.environ["AXIOM_VAR_DIR"], _worker)
    os.makedirs(os.environ["AXIOM_VAR_DIR"], exist_ok=True)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from studio.settings import *  # noqa: E402,F401,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Pages link the plain file names: no collectstatic (and no manifest) before a test run. The live
# server of the browser tests serves them from the finders; tests/browser/test_static_files.py
# runs the production storage under gunicorn.
STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}  # noqa: F405
# An empty collected-files directory, so WhiteNoise has nothing to serve and nothing to warn about.
STATIC_ROOT = os.path.join(os.environ["AXIOM_VAR_DIR"], "staticfiles")
os.makedirs(STATIC_ROOT, exist_ok=True)

# A file-based SQLite test database (not Django's in-memory default), so a Celery worker
# subprocess started by tests/memory/pipeline/test_pipeline_celery.py can open the same database.
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    DATABASES["default"].setdefault("TEST", {})["NAME"] = os.path.join(  # noqa: F405
        os.environ["AXIOM_VAR_DIR"], "test-db.sqlite3"
    )
