"""Writes for the player's persona: its name, description and portrait in Universe_Meta.

The persona is three meta keys (`studio.memory.recall.macros`): `player_character` (the
name, `{{user}}`), `player_description` (prose for the narrator alone) and
`player_portrait` (the reference of a PNG kept by `universes/portraits.py`). A universe made
before personas existed holds one `player_character` value that may read as a name plus a
description; every read splits it (`persona_from_meta`), and `persona_settle` writes that
split back the first time the universe is played (a new save), so the author sees two
fields and can correct them. Writing `player_description`, even empty, marks the name as
settled: an empty description keeps a long name whole.
"""
from __future__ import annotations

import json
from collections.abc import Mapping

from django.core.exceptions import ValidationError
from django.db import transaction

from studio.memory.recall.macros import (
    PLAYER_CHARACTER_META,
    PLAYER_DESCRIPTION_META,
    PLAYER_PORTRAIT_META,
    Persona,
    persona_from_meta,
)
from studio.universes.models import Universe, UniverseMeta
from studio.universes.portraits import portrait_store

MAX_PERSONA_NAME_CHARS = 120
MAX_PERSONA_DESCRIPTION_CHARS = 4000
MAX_PORTRAIT_BYTES = 5 * 1024 * 1024
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def persona_of(*, universe: Universe, meta: Mapping[str, str] | None = None) -> Persona:
    """Return the universe's persona as play reads it (an old one-value name split).

    `meta`: the universe's meta already read (key -> value), so a page that has it reads no more.
    """
    return persona_from_meta(universe.meta_values() if meta is None else meta)


def persona_validate(*, name: str, description: str, portrait: bytes | None = None) -> tuple[str, str]:
    """Return the name and description to store, or raise ValidationError naming each problem."""
    name = " ".join((name or "").split())
    description = (description or "").strip()
    errors: dict[str, str] = {}
    if len(name) > MAX_PERSONA_NAME_CHARS:
        errors["name"] = (f"A name is at most {MAX_PERSONA_NAME_CHARS} characters; put the rest in the "
                          "description.")
    elif any(mark in name for mark in ("{", "}", "\n")):
        errors["name"] = "A name cannot hold braces or line breaks ({{user}} is filled with it)."
    if not name and description:
        errors["name"] = "Give the persona a name: the description alone cannot stand for {{user}}."
    if len(description) > MAX_PERSONA_DESCRIPTION_CHARS:
        errors["description"] = f"The description is longer than {MAX_PERSONA_DESCRIPTION_CHARS:,} characters."
    if portrait is not None:
        if len(portrait) > MAX_PORTRAIT_BYTES:
            errors["portrait"] = f"The portrait is larger than {MAX_PORTRAIT_BYTES // (1024 * 1024)} MB."
        elif not portrait.startswith(PNG_SIGNATURE):
            errors["portrait"] = "The portrait must be a PNG image."
    if errors:
        raise ValidationError(errors)
    return name, description


@transaction.atomic
def persona_set(*, universe: Universe, name: str, description: str, portrait: bytes | None = None,
                remove_portrait: bool = False) -> Persona:
    """Store the persona (the name, the description, and a new PNG portrait when given); return it.

    An empty name removes the persona (and its description). Nothing is written when a
    value is refused.
    """
    name, description = persona_validate(name=name, description=description, portrait=portrait)
    if not name:
        UniverseMeta.objects.filter(universe=universe, key__in=[PLAYER_CHARACTER_META, PLAYER_DESCRIPTION_META]).delete()
    else:
        _put(universe, PLAYER_CHARACTER_META, name)
        _put(universe, PLAYER_DESCRIPTION_META, description)
    if portrait is not None:
        _put(universe, PLAYER_PORTRAIT_META, json.dumps(portrait_store(portrait), sort_keys=True))
    elif remove_portrait:
        UniverseMeta.objects.filter(universe=universe, key=PLAYER_PORTRAIT_META).delete()
    return persona_of(universe=universe)


def persona_settle(*, universe: Universe) -> Persona | None:
    """Write back the split of an old one-value `player_character`; return the persona, or None if nothing changed.

    Run on first use (a new save): the universe's meta then holds the name and the
    description apart, as play has read them, and the author can correct either.
    """
    with transaction.atomic():
        rows = dict(UniverseMeta.objects.select_for_update().filter(
            universe=universe, key__in=[PLAYER_CHARACTER_META, PLAYER_DESCRIPTION_META]).values_list("key", "value"))
        persona = persona_from_meta(rows)
        if not persona.split_from:
            return None
        _put(universe, PLAYER_CHARACTER_META, persona.name)
        _put(universe, PLAYER_DESCRIPTION_META, persona.description)
    return persona


def _put(universe: Universe, key: str, value: str) -> None:
    UniverseMeta.objects.update_or_create(universe=universe, key=key, defaults={"value": value})
