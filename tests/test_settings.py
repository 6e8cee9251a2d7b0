"""Settings come from environment variables only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import json
from django.conf import settings
print(json.dumps({
    "DEBUG": settings.DEBUG,
    "SECRET_KEY": settings.SECRET_KEY,
    "ALLOWED_HOSTS": settings.ALLOWED_HOSTS,
    "DB_ENGINE": settings.DATABASES["default"]["ENGINE"],
    "DB_NAME": str(settings.DATABASES["default"]["NAME"]),
    "DB_HOST": settings.DATABASES["default"].get("HOST", ""),
    "CHROMA_PATH": settings.CHROMA_PATH,
    "CHROMA_HOST": settings.CHROMA_HOST,
    "CHROMA_PORT": settings.CHROMA_PORT,
    "REDIS_URL": settings.REDIS_URL,
    "BROKER": settings.CELERY_BROKER_URL,
    "LLM": [settings.AXIOM_LLM_BASE_URL, settings.AXIOM_LLM_MODEL, settings.AXIOM_LLM_API_KEY],
    "PROXY_SSL": settings.SECURE_PROXY_SSL_HEADER,
    "HSTS": [settings.SECURE_HSTS_SECONDS, settings.SECURE_HSTS_INCLUDE_SUBDOMAINS, settings.SECURE_HSTS_PRELOAD],
    "LOCKOUT": [settings.AXES_ENABLED, settings.AXES_FAILURE_LIMIT,
                settings.AXES_COOLOFF_TIME.total_seconds() if settings.AXES_COOLOFF_TIME else None,
                settings.AXIOM_PROXY_COUNT],
    "STATIC_ROOT": str(settings.STATIC_ROOT),
    "STATIC_STORAGE": settings.STORAGES["staticfiles"]["BACKEND"],
}))
"""


def load_settings(env: dict[str, str]) -> subprocess.CompletedProcess:
    own = (
        "DJANGO_",
        "DATABASE_URL",
        "CHROMA_",
        "REDIS_URL",
        "AXIOM_",
        "SECRET_KEY",
        "DEBUG",
        "ALLOWED_HOSTS",
        "SECURE_HSTS",
        "SECURE_PROXY",
        "STATIC_ROOT",
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith(own)}
    base.update({"DJANGO_SETTINGS_MODULE": "studio.settings"})
    base.update(env)
    code = "import django; django.setup();" + PROBE
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=base, capture_output=True, text=True, timeout=60)


def test_defaults_give_the_embedded_setup(tmp_path):
    proc = load_settings({"DEBUG": "1", "AXIOM_VAR_DIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    values = json.loads(proc.stdout.strip().splitlines()[-1])
    assert values["DEBUG"] is True
    assert values["DB_ENGINE"] == "django.db.backends.sqlite3"
    assert values["DB_NAME"] == str(tmp_path / "studio.sqlite3")
    assert values["CHROMA_PATH"] == str(tmp_path / "chroma")
    assert values["CHROMA_HOST"] == ""
    assert values["REDIS_URL"] == ""
    assert values["BROKER"] == "memory://"
    assert values["LLM"] == ["", "", ""]
    assert values["SECRET_KEY"].startswith("django-insecure")


def test_every_variable_is_read():
    proc = load_settings(
        {
            "DEBUG": "0",
            "SECRET_KEY": "s3cret-from-env",
            "ALLOWED_HOSTS": "studio.example.org, api.example.org",
            "DATABASE_URL": "postgres://axiom:pw@db.internal:5432/axiomdb",
            "CHROMA_HOST": "chroma.internal",
            "CHROMA_PORT": "9000",
            "REDIS_URL": "redis://redis.internal:6379/2",
            "AXIOM_LLM_BASE_URL": "http://llm.internal:11434/v1",
            "AXIOM_LLM_MODEL": "qwen2.5:7b",
            "AXIOM_LLM_API_KEY": "key-123",
        }
    )
    assert proc.returncode == 0, proc.stderr
    values = json.loads(proc.stdout.strip().splitlines()[-1])
    assert values["DEBUG"] is False
    assert values["SECRET_KEY"] == "s3cret-from-env"
    assert values["ALLOWED_HOSTS"] == ["studio.example.org", "api.example.org"]
    assert values["DB_ENGINE"] == "django.db.backends.postgresql"
    assert values["DB_NAME"] == "axiomdb"
    assert values["DB_HOST"] == "db.internal"
    assert values["CHROMA_HOST"] == "chroma.internal"
    assert values["CHROMA_PORT"] == 9000
    assert values["REDIS_URL"] == "redis://redis.internal:6379/2"
    assert values["BROKER"] == "redis://redis.internal:6379/2"
    assert values["LLM"] == ["http://llm.internal:11434/v1", "qwen2.5:7b", "key-123"]


def test_chroma_path_override(tmp_path):
    proc = load_settings({"DEBUG": "1", "CHROMA_PATH": str(tmp_path / "vectors")})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["CHROMA_PATH"] == str(tmp_path / "vectors")


def test_secret_key_required_without_debug():
    env = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DEBUG", "DJANGO_SETTINGS_MODULE"}}
    env.update(DJANGO_SETTINGS_MODULE="studio.settings", DEBUG="0")
    # manage.py commands (runserver, migrate, check) refuse to start ...
    proc = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode != 0
    assert "SECRET_KEY is required" in proc.stderr
    # ... and so does the WSGI application (gunicorn).
    proc = subprocess.run(
        [sys.executable, "-c", "import studio.wsgi"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode != 0
    assert "SECRET_KEY is required" in proc.stderr
    # Importing the code alone (e.g. for the API checker) still works.
    proc = subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); import studio.memory.models"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr


def test_without_debug_nothing_trusts_a_proxy_or_pins_https_unless_configured(tmp_path):
    """No proxy in front (compose): a client's X-Forwarded-Proto is not trusted; HSTS is off."""
    proc = load_settings({"DEBUG": "0", "SECRET_KEY": "k", "AXIOM_VAR_DIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    values = json.loads(proc.stdout.strip().splitlines()[-1])
    assert values["PROXY_SSL"] is None
    assert values["HSTS"] == [0, False, False]
    assert values["LOCKOUT"] == [True, 5, 15 * 60, 0]
    assert values["STATIC_STORAGE"] == "whitenoise.storage.CompressedManifestStaticFilesStorage"
    assert values["STATIC_ROOT"] == str(ROOT / "staticfiles")


def test_proxy_hsts_lockout_and_static_root_are_read(tmp_path):
    proc = load_settings(
        {
            "DEBUG": "0",
            "SECRET_KEY": "k",
            "SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto, https",
            "SECURE_HSTS_SECONDS": "3600",
            "SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
            "SECURE_HSTS_PRELOAD": "1",
            "AXIOM_LOGIN_FAILURE_LIMIT": "10",
            "AXIOM_LOGIN_COOLOFF_MINUTES": "0",
            "AXIOM_PROXY_COUNT": "1",
            "STATIC_ROOT": str(tmp_path / "static"),
        }
    )
    assert proc.returncode == 0, proc.stderr
    values = json.loads(proc.stdout.strip().splitlines()[-1])
    assert values["PROXY_SSL"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert values["HSTS"] == [3600, True, True]
    assert values["LOCKOUT"] == [True, 10, None, 1]
    assert values["STATIC_ROOT"] == str(tmp_path / "static")
    # A trusted proxy that is no address is a clear error at start, not a 500 at login.
    proc = load_settings({"DEBUG": "1", "AXIOM_PROXY_COUNT": "1", "AXIOM_TRUSTED_PROXIES": "nginx"})
    assert proc.returncode != 0 and "AXIOM_TRUSTED_PROXIES must list IP addresses" in proc.stderr
    # A limit of 0 turns the lockout off.
    proc = load_settings({"DEBUG": "1", "AXIOM_LOGIN_FAILURE_LIMIT": "0"})
    assert json.loads(proc.stdout.strip().splitlines()[-1])["LOCKOUT"][0] is False


@pytest.mark.parametrize("value", ["https", "X-Forwarded-Proto", ",https"])
def test_a_malformed_proxy_header_is_a_clear_error(value):
    proc = load_settings({"DEBUG": "1", "SECURE_PROXY_SSL_HEADER": value})
    assert proc.returncode != 0
    assert "SECURE_PROXY_SSL_HEADER must be 'Header-Name,value'" in proc.stderr


def test_a_client_cannot_claim_https_without_a_configured_proxy(db, client, settings):
    """The header a client sends itself does not make the request secure (no HSTS, no secure redirect)."""
    settings.SECURE_HSTS_SECONDS = 3600
    response = client.get("/healthz", HTTP_X_FORWARDED_PROTO="https")
    assert "Strict-Transport-Security" not in response
    # Configured (a proxy that sets the header), the same request counts as https.
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    from django.test import Client

    response = Client().get("/healthz", HTTP_X_FORWARDED_PROTO="https")
    assert response["Strict-Transport-Security"] == "max-age=3600"


@pytest.mark.parametrize("value", ["abc", "1.5"])
def test_bad_integer_is_a_clear_error(value):
    proc = load_settings({"DEBUG": "1", "CHROMA_PORT": value})
    assert proc.returncode != 0
    assert "CHROMA_PORT must be an integer" in proc.stderr
