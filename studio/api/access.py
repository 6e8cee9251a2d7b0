"""Who may reach what through the API.

Reading needs membership of the save's universe (owner, member, or staff); anything else is
404, so the API never reveals that a save exists. Writing (create a save, append a turn,
rewind, fork, retry a job) also needs the playtester role (`studio.roles.is_playtester`,
which authors and staff have too); a member without it gets 403.
"""
from __future__ import annotations

from studio.api.errors import not_found, permission_denied
from studio.roles import is_playtester
from studio.saves.models import Save
from studio.saves.selectors import save_list_for_user
from studio.universes.models import Universe
from studio.universes.selectors import universe_list_for_user


def require_writer(user) -> None:
    if not is_playtester(user):
        raise permission_denied("Writing through the API needs the playtester, author or staff role.")


def save_for(user, save_id: str, *, write: bool = False) -> Save:
    """Return the save `save_id` if `user` may see it (404 otherwise); 403 for a write without the role."""
    save = save_list_for_user(user=user).select_related("forked_from").filter(save_id=save_id).first()
    if save is None:
        raise not_found("save")
    if write:
        require_writer(user)
    return save


def universe_for(user, slug: str) -> Universe | None:
    return universe_list_for_user(user=user).filter(slug=slug).first()
