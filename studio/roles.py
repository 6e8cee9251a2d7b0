"""The studio's roles. Groups are created by a migration (universes 0002_groups)."""

from __future__ import annotations

AUTHORS = "Authors"
PLAYTESTERS = "Playtesters"


def _in_group(user, name: str) -> bool:
    if not getattr(user, "is_authenticated", False):
        return False
    cache = getattr(user, "_studio_group_names", None)
    if cache is None:
        cache = set(user.groups.values_list("name", flat=True))
        user._studio_group_names = cache
    return name in cache


def is_author(user) -> bool:
    """Authors (and staff) edit universes: metadata, lore, missions, imports."""
    return bool(getattr(user, "is_staff", False)) or _in_group(user, AUTHORS)


def is_playtester(user) -> bool:
    """Playtesters (and authors, and staff) open saves, append turns, rewind and fork."""
    return is_author(user) or _in_group(user, PLAYTESTERS)
