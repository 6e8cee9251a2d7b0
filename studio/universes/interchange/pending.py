"""Files waiting between an import's diff preview and its confirmation.

The preview stores the uploaded bytes under VAR_DIR/pending-imports/ and the confirm form
carries only a random token, so a file of any accepted size survives the second request
unchanged (a form field would hit the request-size limit and have its line breaks
normalised). A token is bound to the user who uploaded the file; files older than a day
are removed whenever a new one is stored.
"""

from __future__ import annotations

import re
import secrets
import time
from pathlib import Path

MAX_AGE_SECONDS = 24 * 3600
TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{16,64}$")


def _directory() -> Path:
    from django.conf import settings

    path = Path(settings.VAR_DIR) / "pending-imports"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _path(user_pk: int, token: str) -> Path | None:
    if not TOKEN_RE.match(token or ""):
        return None
    return _directory() / f"{int(user_pk)}-{token}.toml"


def stash(*, user_pk: int, data: bytes) -> str:
    """Keep `data` for `user_pk`; return the token that fetches it back."""
    directory = _directory()
    cutoff = time.time() - MAX_AGE_SECONDS
    for old in directory.glob("*.toml"):
        try:
            if old.stat().st_mtime < cutoff:
                old.unlink()
        except OSError:
            pass  # another process removed it first
    token = secrets.token_urlsafe(24)
    _path(user_pk, token).write_bytes(data)
    return token


def fetch(*, user_pk: int, token: str) -> bytes | None:
    """Return the stashed bytes, or None if the token is unknown, expired or someone else's."""
    path = _path(user_pk, token)
    if path is None or not path.exists():
        return None
    return path.read_bytes()


def drop(*, user_pk: int, token: str) -> None:
    path = _path(user_pk, token)
    if path is not None:
        path.unlink(missing_ok=True)
