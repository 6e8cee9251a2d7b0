"""Writes for API tokens: create (returns the key once), revoke, and authenticate."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.utils import timezone

from studio.api.models import ApiToken

KEY_MARKER = "axm_"
PREFIX_LENGTH = len(KEY_MARKER) + 8
# last_used_at is written at most this often per token, so a busy engine does not turn
# every read request into a database write (and a SQLite write lock).
LAST_USED_RESOLUTION = timedelta(minutes=1)


def hash_key(key: str) -> str:
    """Return the stored form of a key: its SHA-256 hex digest.

    A key carries 256 random bits, so a fast hash is enough; a password hasher would only
    add latency to every API request.
    """
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def generate_key() -> tuple[str, str, str]:
    """Return a new key with its visible prefix and its hash: (key, prefix, key_hash)."""
    key = KEY_MARKER + secrets.token_urlsafe(32)
    return key, key[:PREFIX_LENGTH], hash_key(key)


def api_token_create(*, user, name: str) -> tuple[ApiToken, str]:
    """Create a token for `user` and return it with its key (the only time the key exists)."""
    name = (name or "").strip()
    if not name:
        raise ValueError("a token needs a name")
    key, prefix, key_hash = generate_key()
    token = ApiToken.objects.create(user=user, name=name[:100], prefix=prefix, key_hash=key_hash)
    return token, key


def api_token_revoke(*, token: ApiToken) -> ApiToken:
    """Revoke `token` (idempotent: a revoked token keeps its first revocation time)."""
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


def api_token_authenticate(*, key: str) -> ApiToken | None:
    """Return the active token whose key is `key`, or None; note when it was last used."""
    if not key or not key.startswith(KEY_MARKER) or len(key) > 200:
        return None
    token = (
        ApiToken.objects.select_related("user")
        .filter(key_hash=hash_key(key), revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    if token is None:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token
