"""Who may read and who may change a universe: the one rule every page and the API use.

Reading a universe needs membership (its owner, a member) or staff. Anything else raises
`NotFound`, the same answer as for a universe that does not exist, so its existence is never
revealed. Acting on it needs a role as well, checked after visibility (an outsider learns
nothing, a member learns what they lack): `Access.PLAY` (create and import saves, and every
playtest action on a save) needs the Playtester role, `Access.EDIT` (metadata, lore,
missions, imports) the Author role; authors and staff hold both (`studio.roles`). A missing
role raises `RoleRequired`.

The errors are the domain's, mapped once by each front end: a page gets Django's 404 / 403
(`NotFound` is an `Http404`, `RoleRequired` a `PermissionDenied`), the API its error shape
(`api/faults.py`: `not_found` 404, `permission_denied` 403). The save rules are in
`studio/saves/access.py`, on top of these.
"""

from __future__ import annotations

import enum

from django.core.exceptions import PermissionDenied
from django.http import Http404

from studio.roles import is_author, is_playtester
from studio.world.models import Universe
from studio.universes.selectors import universe_list_for_user


class Access(enum.Enum):
    """What a user asks to do with a universe or a save."""

    READ = "read"  # see it: owner, members, staff
    PLAY = "play"  # playtest: saves, turns, rewind, fork, jobs, save files (Playtester role)
    EDIT = "edit"  # author: the universe itself, its lore and missions (Author role)


ROLE_MESSAGES = {
    Access.PLAY: "Playtest actions (saves, turns, rewind, fork, jobs, save files) need the Playtester or Author role.",
    Access.EDIT: "Only authors can change universes.",
}


class NotFound(Http404):
    """No such object, or one the user may not see: never told apart."""

    def __init__(self, what: str):
        super().__init__(f"No such {what}, or you may not see it.")
        self.what = what


class RoleRequired(PermissionDenied):
    """The user may see the object but lacks the role the action needs."""

    def __init__(self, access: Access):
        super().__init__(ROLE_MESSAGES[access])
        self.access = access


def may(user, access: Access) -> bool:
    """Return whether `user` holds the role `access` needs (READ needs none)."""
    if access is Access.EDIT:
        return is_author(user)
    if access is Access.PLAY:
        return is_playtester(user)
    return True


def require(user, access: Access) -> None:
    """Raise RoleRequired unless `user` holds the role `access` needs."""
    if not may(user, access):
        raise RoleRequired(access)


def universe_for(*, user, slug: str, access: Access = Access.READ) -> Universe:
    """Return the universe `slug` if `user` may see it (else NotFound) and act on it as asked (else RoleRequired)."""
    universe = universe_list_for_user(user=user).filter(slug=slug).first()
    if universe is None:
        raise NotFound("universe")
    require(user, access)
    return universe
