"""Counted nouns for messages and progress lines: "1 belief", "2 beliefs", "3 entries".

Templates use Django's `pluralize` filter; Python text that states a count uses `counted`,
so no message says "1 beliefs". No Django import: any layer may use it.
"""

from __future__ import annotations


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """Return `n` with the noun in the right number (`plural` for irregular nouns, default `singular` + "s")."""
    if plural is None:
        plural = singular[:-1] + "ies" if singular.endswith("y") and singular[-2:-1] not in "aeiou" else singular + "s"
    return f"{n} {singular if n == 1 else plural}"
