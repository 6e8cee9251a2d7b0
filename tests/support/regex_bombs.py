"""Regex keys that run out of time, and how an old book holds one (the regex-key safety tests).

The fixture that counts the searches reaching their limit (`limit_hits`) is in
tests/plugins/regex.py.
"""

from __future__ import annotations

from django.utils import timezone

from studio.world.models import LoreEntry

# A key only a backtracking engine can run (\b), exponential on "a" * n + "!" (fib(n) ways): it
# runs out of time on BOMB_TEXT.
BOMB = "/(a|aa)+\\b$/"
BOMB_TEXT = "a" * 60 + "!"


def bomb_keys(count: int) -> list[str]:
    """`count` distinct keys, each running past its limit on BOMB_TEXT (an old book's keys)."""
    return [f"/(a|aa)+\\b$|zq{n}/" for n in range(count)]


def store_bomb(universe, entry_id: str = "kael", key: str = BOMB) -> None:
    """Put a key in the book as an old save would have it (the services refuse it now)."""
    LoreEntry.objects.filter(universe=universe, entry_id=entry_id).update(keys=[key], updated_at=timezone.now())
