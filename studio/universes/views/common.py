"""Helpers shared by the authoring views (access itself is `studio.universes.access`)."""

from __future__ import annotations

from django.http import HttpRequest
from django.urls import reverse

from studio.universes.access import Access, may
from studio.world.models import Universe


def universe_context(request: HttpRequest, universe: Universe, section: str) -> dict:
    # Row templates build entry URLs from this prefix: one reverse() per page, not ~8 per row.
    lore_base = reverse("universes:lore_list", kwargs={"slug": universe.slug})
    return {
        "universe": universe,
        "section": section,
        "can_edit": may(request.user, Access.EDIT),
        "lore_base": lore_base,
    }
