"""What the tests that start other processes (a Celery worker, web processes, a Chroma server) share.

`database_url()` is the URL of the test database this process uses, for the other processes to
open (the file-based SQLite test database, or the PostgreSQL test database when DATABASE_URL
points at PostgreSQL); an in-memory SQLite database cannot be shared, so the test is skipped.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest
from django.db import connection

from studio.memory.models import JobStatus

VENV_BIN = Path(sys.executable).parent
REDIS_URL = os.environ.get("AXIOM_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")
TERMINAL = (JobStatus.DONE, JobStatus.FAILED, JobStatus.SKIPPED, JobStatus.PAUSED)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 at the time of asking."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_available() -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping())
    except Exception:
        return False


def database_url() -> str:
    """The URL of the test database this process uses, for the other processes."""
    settings = connection.settings_dict
    if settings["ENGINE"].endswith("sqlite3"):
        name = str(settings["NAME"])
        if "memory" in name or not name.startswith("/"):
            pytest.skip("the other processes need a file-based test database (see tests/settings.py)")
        return f"sqlite:///{name}"
    user = settings.get("USER") or "postgres"
    password = f":{settings['PASSWORD']}" if settings.get("PASSWORD") else ""
    host = settings.get("HOST") or "127.0.0.1"
    return f"postgres://{user}{password}@{host}:{settings.get('PORT') or 5432}/{settings['NAME']}"
