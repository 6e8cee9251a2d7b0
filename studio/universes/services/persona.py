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
from studio import limits
from studio.world.models import Universe, UniverseMeta
from studio.universes.portraits import PortraitError, portrait_clean, portrait_load, portrait_release, portrait_store

MAX_PERSONA_NAME_CHARS = limits.PERSONA_NAME.max_chars
MAX_PERSONA_DESCRIPTION_CHARS = limits.PERSONA_DESCRIPTION.max_chars
MAX_PORTRAIT_BYTES = 5 * 1024 * 1024


def persona_of(*, universe: Universe, meta: Mapping[str, str] | None = None) -> Persona:
    """Return the universe's persona as play reads it (an old one-value name split).

    `meta`: the universe's meta already read (key -> value), so a page that has it reads no more.
    """
    return persona_from_meta(universe.meta_values() if meta is None else meta)


def persona_validate(*, name: str, description: str, portrait: bytes | None = None) -> tuple[str, str]:
    """Return the name and description to store, or raise ValidationError naming each problem.

    The one check of a persona: the persona form, the API and the meta editor (its
    `player_character` / `player_description` rows, `persona_meta_validate`) all call it.
    """
    name = " ".join((name or "").split())
    description = (description or "").strip()
    errors: dict[str, str] = {}
    problem = limits.PERSONA_NAME.problem(name) if name else ""
    if problem and len(name) > limits.PERSONA_NAME.max_chars:
        errors["name"] = (
            f"A name is at most {limits.PERSONA_NAME.max_chars} characters; put the rest in the description."
        )
    elif problem:
        errors["name"] = f"The name {problem}"
    elif any(mark in name for mark in ("{", "}")):
        errors["name"] = "A name cannot hold braces or line breaks ({{user}} is filled with it)."
    if not name and description:
        errors["name"] = "Give the persona a name: the description alone cannot stand for {{user}}."
    problem = limits.PERSONA_DESCRIPTION.problem(description)
    if problem:
        errors["description"] = f"The description {problem}"
    if portrait is not None and len(portrait) > MAX_PORTRAIT_BYTES:
        errors["portrait"] = f"The portrait is larger than {MAX_PORTRAIT_BYTES // (1024 * 1024)} MB."
    if errors:
        raise ValidationError(errors)
    return name, description


def persona_meta_validate(*, key: str, value: str) -> str:
    """Return a persona meta value the meta editor may store, or raise ValidationError({"value": ...}).

    `player_character` and `player_description` follow the persona form's rules; the
    portrait reference must name a portrait the studio keeps (one `persona_set` checked).
    """
    try:
        if key == PLAYER_CHARACTER_META:
            name = persona_validate(name=value, description="")[0]
            if not name:
                raise ValidationError({"name": "The persona's name must not be blank: delete the row to have none."})
            return name
        if key == PLAYER_DESCRIPTION_META:
            return persona_validate(name="persona", description=value)[1]
    except ValidationError as exc:
        raise ValidationError({"value": [m for messages in exc.message_dict.values() for m in messages]}) from None
    if key == PLAYER_PORTRAIT_META:
        try:
            reference = json.loads(value, **limits.strict_json_hooks())
        except ValueError:
            reference = None
        if portrait_load(reference) is None:
            raise ValidationError(
                {
                    "value": "player_portrait names a portrait this studio keeps; upload one with the "
                    "persona form instead."
                }
            )
    return value


@transaction.atomic
def persona_set(
    *, universe: Universe, name: str, description: str, portrait: bytes | None = None, remove_portrait: bool = False
) -> Persona:
    """Store the persona (the name, the description, and a new PNG portrait when given); return it.

    An empty name removes the persona (and its description). The portrait is decoded with a
    pixel limit and re-encoded (`portraits.portrait_clean`); a replaced or removed one is
    deleted after the commit unless something else names it. Nothing is written when a
    value is refused.
    """
    name, description = persona_validate(name=name, description=description, portrait=portrait)
    if portrait is not None:
        try:
            portrait = portrait_clean(portrait)
        except PortraitError as exc:
            raise ValidationError({"portrait": str(exc)}) from None
    old = persona_of(universe=universe).portrait
    if not name:
        UniverseMeta.objects.filter(
            universe=universe, key__in=[PLAYER_CHARACTER_META, PLAYER_DESCRIPTION_META]
        ).delete()
    else:
        _put(universe, PLAYER_CHARACTER_META, name)
        _put(universe, PLAYER_DESCRIPTION_META, description)
    if portrait is not None:
        _put(universe, PLAYER_PORTRAIT_META, json.dumps(portrait_store(portrait), sort_keys=True))
    elif remove_portrait:
        UniverseMeta.objects.filter(universe=universe, key=PLAYER_PORTRAIT_META).delete()
    if old and (portrait is not None or remove_portrait):
        transaction.on_commit(lambda: portrait_release(old))
    return persona_of(universe=universe)


def persona_settle(*, universe: Universe) -> Persona | None:
    """Write back the split of an old one-value `player_character`; return the persona, or None if nothing changed.

    Run on first use (a new save): the universe's meta then holds the name and the
    description apart, as play has read them, and the author can correct either.
    """
    with transaction.atomic():
        rows = dict(
            UniverseMeta.objects.select_for_update()
            .filter(universe=universe, key__in=[PLAYER_CHARACTER_META, PLAYER_DESCRIPTION_META])
            .values_list("key", "value")
        )
        persona = persona_from_meta(rows)
        if not persona.split_from:
            return None
        _put(universe, PLAYER_CHARACTER_META, persona.name)
        _put(universe, PLAYER_DESCRIPTION_META, persona.description)
    return persona


def _put(universe: Universe, key: str, value: str) -> None:
    UniverseMeta.objects.update_or_create(universe=universe, key=key, defaults={"value": value})
