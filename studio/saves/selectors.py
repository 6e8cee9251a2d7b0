"""Reads for saves: only those of universes the user may see."""
from __future__ import annotations

from django.db.models import QuerySet

from studio.saves.models import Save
from studio.universes.selectors import universe_list_for_user


def save_list_for_user(*, user) -> QuerySet[Save]:
    return Save.objects.filter(universe__in=universe_list_for_user(user=user)).select_related("universe")
