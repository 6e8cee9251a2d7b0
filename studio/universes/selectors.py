"""Reads for universes: what a user may see, with the rows a page needs."""
from __future__ import annotations

from django.db.models import Q, QuerySet

from studio.universes.models import LoreEntry, Universe


def universe_list_for_user(*, user) -> QuerySet[Universe]:
    """Return the universes `user` may see: staff see all, others those they own or belong to."""
    qs = Universe.objects.all()
    if not getattr(user, "is_authenticated", False):
        return qs.none()
    if user.is_staff:
        return qs
    return qs.filter(Q(owner=user) | Q(members=user)).distinct()


def lore_entry_list(*, universe: Universe) -> QuerySet[LoreEntry]:
    return universe.lore_entries.all()
