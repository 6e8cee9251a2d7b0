"""Writing Character Cards: a universe's lore as a `character_book`, a V2 / V3 card, a PNG card.

`export_book` writes each entry through `character_card.encode_entry` (what the import kept,
with the studio's changed columns written back, so import -> export loses nothing) and the
studio's own fields in `extensions.axiom`; `export_card` fills the card from a Character
entry an imported card made (its fields, the V1 mirror) or from the universe; `export_png`
puts the card in both a `chara` (V2) and a `ccv3` (V3) chunk of the character's portrait.
The mapping itself is described in character_card.py.
"""

from __future__ import annotations

import base64
import io
import json
from typing import Any

from studio.universes.interchange import AXIOM_EXTENSION, DECORATOR_EXTENSION, card_fields
from studio.universes.interchange.card_png import with_card_chunks
from studio.universes.interchange.character_card import (
    BOOK_META_KEY,
    CARD_META_KEY,
    EXTENSION,
    derived_title,
    encode_entry,
)
from studio.universes.opening import opening_from_meta

_V2_REQUIRED = {
    "name": "",
    "description": "",
    "personality": "",
    "scenario": "",
    "first_mes": "",
    "mes_example": "",
    "creator_notes": "",
    "system_prompt": "",
    "post_history_instructions": "",
    "alternate_greetings": [],
    "tags": [],
    "creator": "",
    "character_version": "",
    "extensions": {},
}
_V3_EXTRA = {"group_only_greetings": [], "assets": [], "nickname": "", "creator_notes_multilingual": {}}


def meta_json(universe, key: str) -> dict[str, Any]:
    """Return the JSON object stored in a meta key ({} when missing or not an object)."""
    raw = universe.meta.filter(key=key).values_list("value", flat=True).first()
    try:
        value = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def export_book(
    universe, entries, *, book_fields: dict[str, Any] | None = None, in_file_order: bool = False
) -> dict[str, Any]:
    """Return a character_book object for `entries` (its own fields from a card, or the meta key).

    Entries go by entry id; `in_file_order` (a card's own book) keeps them in the order the
    import created them, which is the order they had in the card."""
    from studio.universes.activation import activation_values
    from studio.universes.services import lore_extension

    book = {"name": universe.name, "extensions": {}}
    book.update(meta_json(universe, BOOK_META_KEY) if book_fields is None else book_fields)
    out = []
    entries = sorted(entries, key=(lambda e: e.pk) if in_file_order else (lambda e: e.entry_id))
    used = {
        (e.extensions or {}).get(EXTENSION, {}).get("id")
        for e in entries
        if isinstance((e.extensions or {}).get(EXTENSION), dict)
    }
    free = (n for n in range(len(entries) + len(used) + 1) if n not in used)  # ids for entries made here
    for position, entry in enumerate(entries):
        kept = (entry.extensions or {}).get(EXTENSION)
        lines = list((entry.extensions or {}).get(DECORATOR_EXTENSION) or [])
        columns = activation_values(entry)
        if isinstance(kept, dict):
            item = encode_entry(kept, lines, columns, list(entry.keys or []), entry.text)
            if entry.title != derived_title(item, kept.get("id", position)):  # what a re-import derives
                item["name"] = entry.title
                if "comment" in item:
                    item["comment"] = entry.title
        else:
            template = {
                "id": next(free),
                "name": entry.title,
                "comment": entry.title,
                "secondary_keys": [],
                "enabled": True,
                "insertion_order": 100,
                "case_sensitive": False,
                "priority": 10,
                "selective": False,
                "constant": False,
                "position": "before_char",
                "use_regex": False,
                "extensions": {},
            }
            item = encode_entry({}, [], columns, list(entry.keys or []), entry.text)
            item = {**template, **item, "extensions": item.get("extensions") or {}}
        extensions = dict(item.get("extensions") or {})
        extensions[AXIOM_EXTENSION] = lore_extension(entry)
        item["extensions"] = extensions
        out.append(item)
    book["entries"] = out
    return book


def card_version(character) -> int:
    """The spec version a Character entry's card came in (2 when it has none)."""
    record = (character.extensions or {}).get(card_fields.CHARACTER_EXTENSION) or {} if character else {}
    return 3 if record.get("spec") == "chara_card_v3" else 2


def export_card(universe, entries, *, version: int | None = None, character=None) -> dict[str, Any]:
    """Return a Character Card (V2 or V3) with `entries` as its character_book.

    With `character` (a Character entry an imported card made), the card's fields come from
    that entry and the V1 top-level mirror fields are written beside `data`; without one, the
    universe's name and description (and a card kept in the legacy meta key) fill it.
    """
    version = version or card_version(character)
    data = dict(_V2_REQUIRED)
    if version == 3:
        data.update(_V3_EXTRA)
    v1: dict[str, Any] = {}
    book_fields = None
    if character is not None:
        current, record = card_fields.current_data(character)
        data.update(current)
        if record.get("book") is not None:
            book_fields = record["book"]
        entries = [e for e in entries if e.pk != character.pk]
        v1 = card_fields.v1_fields(data, record, create_date=card_fields.st_date(character.created_at))
    else:
        data.update({"name": universe.name, "description": universe.description})
        stored = meta_json(universe, CARD_META_KEY).get("data")
        if isinstance(stored, dict):
            data.update(stored)
        opening = opening_from_meta(universe.meta_values())  # the universe's own opening is the card's
        if opening.first_message:
            data.update(first_mes=opening.first_message, alternate_greetings=list(opening.alternate_greetings))
        if opening.scenario:
            data["scenario"] = opening.scenario
        v1 = card_fields.v1_fields(data, {}, create_date=card_fields.st_date(universe.created_at))
    if version == 2 and character is not None:
        # V3-only fields at their V3 default are not part of a V2 card (a V2 card exported as
        # V3 and imported back would otherwise grow them in its V2 chunk).
        for name, default in _V3_EXTRA.items():
            if name in data and data[name] == default:
                del data[name]
    data["character_book"] = export_book(
        universe, entries, book_fields=book_fields, in_file_order=character is not None
    )
    if version == 3:
        return {**v1, "spec": "chara_card_v3", "spec_version": "3.0", "data": data}
    return {**v1, "spec": "chara_card_v2", "spec_version": "2.0", "data": data}


def _blank_portrait(universe) -> bytes:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (400, 600), (29, 35, 48))
    ImageDraw.Draw(image).text((24, 24), universe.name[:40], fill=(255, 255, 255))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def export_png(universe, entries, *, character=None) -> bytes:
    """Return a PNG card: the character's own portrait (else a plain image) with the card in
    both a `chara` (V2) and a `ccv3` (V3) chunk, SillyTavern's way; old card chunks are replaced."""
    from studio.universes.portraits import portrait_load

    png = None
    if character is not None:
        record = (character.extensions or {}).get(card_fields.CHARACTER_EXTENSION) or {}
        png = portrait_load(record.get("portrait"))
    if png is None:
        png = _blank_portrait(universe)
    chunks = []
    for keyword, version in (("chara", 2), ("ccv3", 3)):
        card = export_card(universe, entries, version=version, character=character)
        chunks.append((keyword, base64.b64encode(json.dumps(card, ensure_ascii=False).encode())))
    return with_card_chunks(png, chunks)
