"""URLs of a save's pages, as the save tests build them."""

from __future__ import annotations

from django.urls import reverse


def save_url(name: str, game_save, *args) -> str:
    """The `saves:<name>` URL of `game_save` (with the route's other arguments)."""
    return reverse(f"saves:{name}", args=[game_save.save_id, *args])
