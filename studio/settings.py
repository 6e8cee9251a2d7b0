"""Settings for Axiom Studio.

Every setting that differs between machines comes from an environment variable, read here
and nowhere else (see README, "Environment variables"). The defaults give the embedded,
one-machine set-up: SQLite under var/, a local Chroma store, jobs in-process, no LLM.
"""

from __future__ import annotations

import ipaddress
import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return int(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from exc


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


DEBUG = env_bool("DEBUG", False)
VAR_DIR = Path(os.environ.get("AXIOM_VAR_DIR", BASE_DIR / "var"))

# Required when DEBUG is off. Left empty here rather than raising, so that tools which only
# import the code (the API checker, `manage.py help`) still work; every entry point that
# serves or works (`manage.py check`/runserver/migrate, wsgi, the Celery worker) refuses to
# start without it (studio/checks.py, studio/wsgi.py, studio/celery.py).
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY and DEBUG:
    SECRET_KEY = "django-insecure-development-only-key-do-not-use-in-production"

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "axes",
    "django_htmx",
    "template_partials",
    "ninja",  # the API's Swagger UI static files (studio/api/views_docs.py)
    "studio.world",
    "studio.universes",
    "studio.saves",
    "studio.memory",
    "studio.inspector",
    "studio.api",
    "studio.proxy",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files before everything else (WhiteNoise's docs): it answers /static/ itself.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Before anything reads a body (the CSRF check reads a form's fields): an oversized upload gets 413 unread.
    "studio.middleware.RequestSizeLimitMiddleware",
    "studio.middleware.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: turns a locked-out login into the lockout page (429).
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "studio.urls"
WSGI_APPLICATION = "studio.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

_DATABASE_URL = os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'studio.sqlite3'}"
DATABASES = {
    "default": dj_database_url.parse(
        _DATABASE_URL,
        # A SQLite connection is kept between requests: closing the last one checkpoints the WAL (~15 ms a request
        # on the turn path, issue 33) and opening one runs the PRAGMAs again. A server's connections are not kept
        # unless asked (each web process would hold them).
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 600 if _DATABASE_URL.startswith("sqlite") else 0),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the studio read while a job writes; the timeout waits out short write locks
    # instead of failing at once with "database is locked". A long save's file outgrows SQLite's
    # default 2 MB page cache: each connection keeps `SQLITE_CACHE_MB` of pages and reads the file
    # through a memory map of up to `SQLITE_MMAP_MB` (no read() call per page; the OS shares the pages
    # between processes). Both are per connection; `SQLITE_MMAP_MB=0` turns the map off.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": env_int("SQLITE_TIMEOUT", 20),
            "transaction_mode": "IMMEDIATE",
            "init_command": (
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                f"PRAGMA cache_size=-{env_int('SQLITE_CACHE_MB', 64) * 1024}; "
                f"PRAGMA mmap_size={env_int('SQLITE_MMAP_MB', 256) * 1024 * 1024};"
            ),
        }
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# django-axes first: it refuses a locked-out account or address before any password is checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", "").strip() or BASE_DIR / "staticfiles")
# WhiteNoise serves STATIC_ROOT (filled by `manage.py collectstatic`) from the web process:
# file names carry a hash of their content (cached for good, "immutable"), with gzip copies beside them.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("AXIOM_MAX_REQUEST_BYTES", 5 * 1024 * 1024)
FILE_UPLOAD_MAX_MEMORY_SIZE = DATA_UPLOAD_MAX_MEMORY_SIZE
# The JSON API refuses larger request bodies with 413 before reading them.
AXIOM_API_MAX_BODY_BYTES = env_int("AXIOM_API_MAX_BODY_BYTES", 1024 * 1024)
# A save file (export / import, page and API), compressed and decompressed alike.
AXIOM_SAVE_FILE_MAX_BYTES = env_int("AXIOM_SAVE_FILE_MAX_BYTES", 16 * 1024 * 1024)
# Any request body, uploads included, checked before it is read (studio/middleware.py): room for the
# largest upload (a save file) and its multipart framing.
AXIOM_MAX_UPLOAD_BYTES = env_int(
    "AXIOM_MAX_UPLOAD_BYTES", max(DATA_UPLOAD_MAX_MEMORY_SIZE, AXIOM_SAVE_FILE_MAX_BYTES) + 1024 * 1024
)

# --- Vector store (ChromaDB) -------------------------------------------------------------
# CHROMA_HOST set: a Chroma server (HttpClient), safe for any number of processes.
# Otherwise an embedded store at CHROMA_PATH, which exactly one process may open.
CHROMA_HOST = os.environ.get("CHROMA_HOST", "").strip()
CHROMA_PORT = env_int("CHROMA_PORT", 8000)
CHROMA_PATH = os.environ.get("CHROMA_PATH", "").strip() or str(VAR_DIR / "chroma")
# Cross-encoder: off unless a model name or local path is configured (nothing downloads).
AXIOM_RERANKER_MODEL = os.environ.get("AXIOM_RERANKER_MODEL", "").strip()
AXIOM_RERANK_POOL = env_int("AXIOM_RERANK_POOL", 50)
# Load the embedding model in the background when a serving process starts.
AXIOM_WARM_EMBEDDINGS = env_bool("AXIOM_WARM_EMBEDDINGS", False)
# Torch threads per process for embedding. 1 by default: on a few shared cores, several
# threads per encode spin against each other (measured 15x slower under load); scale with
# processes instead.
AXIOM_TORCH_THREADS = env_int("AXIOM_TORCH_THREADS", 1)
# Which runtime embeds: auto (ONNX Runtime over a one-time export under var/onnx/, torch
# when that cannot load), onnx or torch. Both give the same vectors (docs/retrieval.md).
AXIOM_EMBEDDING_RUNTIME = os.environ.get("AXIOM_EMBEDDING_RUNTIME", "").strip().lower() or "auto"
if AXIOM_EMBEDDING_RUNTIME not in {"auto", "onnx", "torch"}:
    raise ImproperlyConfigured(f"AXIOM_EMBEDDING_RUNTIME must be auto, onnx or torch, got {AXIOM_EMBEDDING_RUNTIME!r}")

# --- Background jobs ---------------------------------------------------------------------
# REDIS_URL unset: jobs run in-process on a small thread pool. Set: Celery workers on Redis.
REDIS_URL = os.environ.get("REDIS_URL", "").strip()
AXIOM_INPROCESS_WORKERS = env_int("AXIOM_INPROCESS_WORKERS", 2)
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = False
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env_int("AXIOM_TASK_TIME_LIMIT", 300)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("AXIOM_TASK_SOFT_TIME_LIMIT", 240)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
# Job runner (studio/memory/jobs/): attempts and backoff for failed jobs (every kind), the Celery queue
# jobs are sent to, and an eager mode that runs a job inline when its transaction commits.
AXIOM_JOB_MAX_ATTEMPTS = env_int("AXIOM_JOB_MAX_ATTEMPTS", 3)
AXIOM_JOB_RETRY_BACKOFF = float(os.environ.get("AXIOM_JOB_RETRY_BACKOFF", "5") or 5)
AXIOM_JOB_QUEUE = os.environ.get("AXIOM_JOB_QUEUE", "").strip() or "celery"
AXIOM_JOBS_EAGER = env_bool("AXIOM_JOBS_EAGER", False)
# Up to this many queued turns of one save are claimed together: one embedding call for
# their narratives, one claim for their living jobs (run one by one, in turn order).
AXIOM_JOB_BATCH_SIZE = env_int("AXIOM_JOB_BATCH_SIZE", 16)

# --- LLM (living memory and the narrator) ---------------------------------------------------
# Any OpenAI-compatible chat endpoint. Unset base URL: living-mode jobs end as skipped.


def env_float(name: str, default: float | None) -> float | None:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return float(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a number, got {value!r}") from exc


AXIOM_LLM_BASE_URL = os.environ.get("AXIOM_LLM_BASE_URL", "").strip()
AXIOM_LLM_MODEL = os.environ.get("AXIOM_LLM_MODEL", "").strip()
AXIOM_LLM_API_KEY = os.environ.get("AXIOM_LLM_API_KEY", "").strip()
AXIOM_LLM_MODEL_EXTRACT = os.environ.get("AXIOM_LLM_MODEL_EXTRACT", "").strip()
AXIOM_LLM_MODEL_CONSOLIDATE = os.environ.get("AXIOM_LLM_MODEL_CONSOLIDATE", "").strip()
AXIOM_LLM_MODEL_REFLECT = os.environ.get("AXIOM_LLM_MODEL_REFLECT", "").strip()
AXIOM_LLM_MODEL_NARRATE = os.environ.get("AXIOM_LLM_MODEL_NARRATE", "").strip()
AXIOM_LLM_MODEL_SUMMARIZE = os.environ.get("AXIOM_LLM_MODEL_SUMMARIZE", "").strip()  # chapter and arc summaries
AXIOM_LLM_MODEL_GUARD = os.environ.get("AXIOM_LLM_MODEL_GUARD", "").strip()  # the continuity guard's judge
AXIOM_LLM_TIMEOUT = env_float("AXIOM_LLM_TIMEOUT", 60.0)
AXIOM_LLM_MAX_RETRIES = env_int("AXIOM_LLM_MAX_RETRIES", 3)
AXIOM_LLM_MAX_TOKENS = env_int("AXIOM_LLM_MAX_TOKENS", 1024)
# Stream every call, the JSON operations too: a timeout then stops the server's generation.
AXIOM_LLM_STREAM = env_bool("AXIOM_LLM_STREAM", False)
AXIOM_LLM_CALLS_PER_HOUR = env_int("AXIOM_LLM_CALLS_PER_HOUR", 600)
AXIOM_LLM_TOKENS_PER_HOUR = env_int("AXIOM_LLM_TOKENS_PER_HOUR", 500_000)
# The spend guard per user and rolling day, on top of the per-save one: the calls made for a user's
# requests (the memory proxy's key holder), over every save. 0 turns a cap off.
AXIOM_LLM_CALLS_PER_USER_DAY = env_int("AXIOM_LLM_CALLS_PER_USER_DAY", 2000)
AXIOM_LLM_TOKENS_PER_USER_DAY = env_int("AXIOM_LLM_TOKENS_PER_USER_DAY", 2_000_000)
# What a memory-proxy request may ask of the upstream (studio/proxy/spending.py): the models it may
# name ("*": any; empty: the studio's narrate model only), and caps on max_tokens (0: the narrator's
# own, AXIOM_LLM_MAX_TOKENS_NARRATE else AXIOM_LLM_MAX_TOKENS) and on n.
AXIOM_PROXY_MODELS = env_list("AXIOM_PROXY_MODELS", [])
AXIOM_PROXY_MAX_TOKENS = env_int("AXIOM_PROXY_MAX_TOKENS", 0)
AXIOM_PROXY_MAX_N = env_int("AXIOM_PROXY_MAX_N", 1)
# Per operation (EXTRACT, CONSOLIDATE, REFLECT, NARRATE): AXIOM_LLM_TEMPERATURE_<OP>,
# AXIOM_LLM_FREQUENCY_PENALTY_<OP>, AXIOM_LLM_PRESENCE_PENALTY_<OP>, AXIOM_LLM_REPEAT_PENALTY_<OP>
# (llama.cpp), AXIOM_LLM_MAX_TOKENS_<OP>, AXIOM_LLM_TIMEOUT_<OP>,
# AXIOM_LLM_STRUCTURED_MODES[_<OP>] (e.g. "json_object,text": the structured-output modes to
# try, in the documented order json_schema, json_object_schema, json_object, text; unset:
# all). Unset penalties are not sent
# (the server's default applies); unset token and time limits fall back to the global ones.
# JSON operations default to temperature 0 (reproducible answers); reflection writes prose
# (0.3), the narrator tells a story (0.8).
_LLM_DEFAULT_TEMPERATURE = {
    "extract": 0.0,
    "consolidate": 0.0,
    "reflect": 0.3,
    "narrate": 0.8,
    "summarize": 0.2,
    "guard": 0.0,
}
AXIOM_LLM_OPERATION_OPTIONS = {
    operation: {
        "temperature": env_float(f"AXIOM_LLM_TEMPERATURE_{operation.upper()}", temperature),
        "frequency_penalty": env_float(f"AXIOM_LLM_FREQUENCY_PENALTY_{operation.upper()}", None),
        "presence_penalty": env_float(f"AXIOM_LLM_PRESENCE_PENALTY_{operation.upper()}", None),
        "repeat_penalty": env_float(f"AXIOM_LLM_REPEAT_PENALTY_{operation.upper()}", None),
        "max_tokens": env_int(f"AXIOM_LLM_MAX_TOKENS_{operation.upper()}", 0) or None,
        "timeout": env_float(f"AXIOM_LLM_TIMEOUT_{operation.upper()}", None),
        "modes": os.environ.get(f"AXIOM_LLM_STRUCTURED_MODES_{operation.upper()}", "").strip()
        or os.environ.get("AXIOM_LLM_STRUCTURED_MODES", "").strip()
        or None,
    }
    for operation, temperature in _LLM_DEFAULT_TEMPERATURE.items()
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    # axes: failures and lockouts are warnings; its per-attempt and start-up notes are left out.
    "loggers": {"chromadb": {"level": "WARNING"}, "httpx": {"level": "WARNING"}, "axes": {"level": "WARNING"}},
}

# --- Login throttling (django-axes) ---------------------------------------------------------
# After AXIOM_LOGIN_FAILURE_LIMIT failed logins for one account, or from one address, further
# attempts are refused (429, registration/locked_out.html) until AXIOM_LOGIN_COOLOFF_MINUTES
# have passed since the last failure; 0 minutes: until an administrator unlocks (admin, "Access
# attempts"; or `manage.py axes_reset`). A limit of 0 turns the lockout off. The counts live in
# the database, so every gunicorn worker sees them.
AXIOM_LOGIN_FAILURE_LIMIT = env_int("AXIOM_LOGIN_FAILURE_LIMIT", 5)
AXIOM_LOGIN_COOLOFF_MINUTES = env_int("AXIOM_LOGIN_COOLOFF_MINUTES", 15)
if AXIOM_LOGIN_FAILURE_LIMIT < 0 or AXIOM_LOGIN_COOLOFF_MINUTES < 0:
    raise ImproperlyConfigured("AXIOM_LOGIN_FAILURE_LIMIT and AXIOM_LOGIN_COOLOFF_MINUTES must be 0 or more")
AXES_ENABLED = AXIOM_LOGIN_FAILURE_LIMIT > 0
AXES_FAILURE_LIMIT = max(AXIOM_LOGIN_FAILURE_LIMIT, 1)  # axes wants a positive limit even when off
AXES_COOLOFF_TIME = timedelta(minutes=AXIOM_LOGIN_COOLOFF_MINUTES) if AXIOM_LOGIN_COOLOFF_MINUTES else None
# Per account and, separately, per address: either reaching the limit locks.
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_LOCKOUT_CALLABLE = "studio.lockout.lockout_response"
AXES_RESET_ON_SUCCESS = False  # a success of the attacker's own account must not clear the address's count
# The cool-off runs from the failure that locked; attempts while locked do not extend it.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
# The address a login comes from: REMOTE_ADDR, or, behind AXIOM_PROXY_COUNT trusted proxies that
# each append to X-Forwarded-For, the address the outermost of them saw (studio/lockout.py).
AXIOM_PROXY_COUNT = env_int("AXIOM_PROXY_COUNT", 0)
# The peers X-Forwarded-For is taken from (addresses or networks, comma-separated). Unset, any
# peer's header is read (a proxy count alone); set, a request from any other peer (one that
# reached gunicorn's port directly) is counted against its own address.
AXIOM_TRUSTED_PROXIES = env_list("AXIOM_TRUSTED_PROXIES", [])
# Origins whose pages may call the memory proxy (/v1/) from the browser (RisuAI's web build):
# comma-separated, or * for any; empty: no CORS headers (studio/proxy/views.py).
AXIOM_PROXY_CORS_ORIGINS = env_list("AXIOM_PROXY_CORS_ORIGINS", [])
for _proxy in AXIOM_TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy, strict=False)
    except ValueError as exc:
        raise ImproperlyConfigured(
            f"AXIOM_TRUSTED_PROXIES must list IP addresses or networks (e.g. 172.18.0.0/16), got {_proxy!r}"
        ) from exc
AXES_CLIENT_IP_CALLABLE = "studio.lockout.client_ip"

# --- Production hardening (active when DEBUG is off) --------------------------------------
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
SESSION_COOKIE_HTTPONLY = True
CONTENT_SECURITY_POLICY = os.environ.get("AXIOM_CSP", "").strip() or None  # None: the default, self only


def env_proxy_ssl_header(name: str) -> tuple[str, str] | None:
    """Read `Header-Name,value` (e.g. `X-Forwarded-Proto,https`) as Django's META tuple."""
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    header, sep, expected = (part.strip() for part in value.partition(","))
    if not sep or not header or not expected:
        raise ImproperlyConfigured(f"{name} must be 'Header-Name,value', e.g. 'X-Forwarded-Proto,https'; got {value!r}")
    header = header.upper().replace("-", "_")
    return (header if header.startswith("HTTP_") else f"HTTP_{header}", expected)


# Trust a proxy's "this came in over https" header only when one is configured: without a
# proxy that sets (and overwrites) it, any client could send it and claim https.
SECURE_PROXY_SSL_HEADER = env_proxy_ssl_header("SECURE_PROXY_SSL_HEADER")
# HSTS is off unless SECURE_HSTS_SECONDS is set: once a browser has seen it, the site cannot go
# back to plain http for that long. Start small (3600) and raise it once https works everywhere.
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
if not DEBUG:
    SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", True)
    CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", True)
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
