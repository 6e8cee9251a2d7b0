"""Who may read and who may change a save: the universe rules applied to the save's universe.

A save is visible to whoever may see its universe (`universes.access`); anything else is
`NotFound` (a save of another universe and a save that does not exist answer alike). Acting
on a save (append or edit a turn, narrate, rewind, fork, retry a job, export it) is
`Access.PLAY` and needs the Playtester role, checked after visibility (`RoleRequired`).
Pages get 404 / 403 from these errors, the API its `not_found` / `permission_denied`.
"""

from __future__ import annotations

from studio.world.models import Save
from studio.saves.selectors import save_list_for_user
from studio.universes.access import Access, NotFound, RoleRequired, may, require, universe_for

__all__ = ["Access", "NotFound", "RoleRequired", "may", "require", "save_for", "universe_for"]


def save_for(*, user, save_id: str, access: Access = Access.READ) -> Save:
    """Return the save `save_id` if `user` may see it (else NotFound) and act on it as asked (else RoleRequired)."""
    if access is Access.EDIT:
        raise ValueError("a save is read or played (Access.READ, Access.PLAY); its universe is what authors edit")
    game_save = save_list_for_user(user=user).select_related("forked_from").filter(save_id=save_id).first()
    if game_save is None:
        raise NotFound("save")
    require(user, access)
    return game_save
