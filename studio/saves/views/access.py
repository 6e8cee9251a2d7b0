"""Who may open a save and who may change it; every save view goes through these."""
from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from studio.roles import is_playtester
from studio.saves.models import Save
from studio.saves.selectors import save_get_for_user


def visible_save(request: HttpRequest, save_id: str) -> Save:
    """Return the save if the user belongs to its universe; 404 otherwise."""
    return save_get_for_user(user=request.user, save_id=save_id)


def playtest_save(request: HttpRequest, save_id: str) -> Save:
    """Return the save for a playtest action: visible (404) and a playtester (403)."""
    game_save = visible_save(request, save_id)
    require_playtester(request)
    return game_save


def require_playtester(request: HttpRequest) -> None:
    if not is_playtester(request.user):
        raise PermissionDenied("Playtest actions need the Playtester or Author role.")
