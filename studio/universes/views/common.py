"""Access checks and small helpers shared by the authoring views."""
from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.urls import reverse

from studio.roles import is_author
from studio.universes.models import Universe
from studio.universes.selectors import universe_get_for_user


def visible_universe(request: HttpRequest, slug: str) -> Universe:
    """Return the universe if the user may see it (404 otherwise)."""
    return universe_get_for_user(user=request.user, slug=slug)


def writable_universe(request: HttpRequest, slug: str) -> Universe:
    """Return the universe if the user may see it (404) and edit it (403)."""
    universe = visible_universe(request, slug)
    require_author(request)
    return universe


def require_author(request: HttpRequest) -> None:
    if not is_author(request.user):
        raise PermissionDenied("Only authors can change universes.")


def universe_context(request: HttpRequest, universe: Universe, section: str) -> dict:
    # Row templates build entry URLs from this prefix: one reverse() per page, not ~8 per row.
    lore_base = reverse("universes:lore_list", kwargs={"slug": universe.slug})
    return {"universe": universe, "section": section, "can_edit": is_author(request.user), "lore_base": lore_base}
