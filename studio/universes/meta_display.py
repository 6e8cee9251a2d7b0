"""How the Metadata page summarises a JSON-object meta value instead of dumping it.

An imported Character Card, its character_book or a SillyTavern world-info file leaves its
file-level fields in one meta key as a JSON object (kept for re-export). Shown raw, a card
with a long description fills screens; `meta_summary` turns it into a few lines: what it is,
the character's name, which fields it carries (with their sizes) and how many Lore Book
entries came from the same book. The raw JSON stays one click away on the page.

A card is shown as readable fields (`card_fields`: label and value, in the order of
`card_fields.FIELD_LABELS`): since a card import makes a Character entry, the meta key only
names that entry, and the fields are read from the entry as it is now; a card kept whole in
the meta key (imports before Character entries existed) is read from the key itself.

Never raises: a value that is not a JSON object (hand-edited, truncated) gets no summary
and the page shows the text as it is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from studio.universes.interchange import card_fields as card_fields_module
from studio.universes.interchange import character_card, sillytavern

# Meta key -> (what the value is, the lore-entry extension that marks entries of its book).
SUMMARISED = {
    character_card.CARD_META_KEY: ("Character card", character_card.EXTENSION),
    character_card.BOOK_META_KEY: ("Character book", character_card.EXTENSION),
    sillytavern.META_KEY: ("SillyTavern world info", sillytavern.EXTENSION),
}


@dataclass
class MetaSummary:
    kind: str
    name: str = ""
    spec: str = ""
    fields: list[tuple[str, str]] = field(default_factory=list)  # (field, size), non-empty ones
    empty_fields: list[str] = field(default_factory=list)
    book_entries: int | None = None  # Lore Book entries imported from this book
    raw_chars: int = 0
    card_fields: list[tuple[str, Any, bool]] = field(default_factory=list)  # (label, text or texts, is a list)
    entry_id: str = ""  # the Character entry holding the card
    portrait_bytes: int | None = None


def _size(value: Any) -> str:
    if isinstance(value, str):
        return f"{len(value):,} character{'s' if len(value) != 1 else ''}"
    if isinstance(value, list):
        return f"{len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, dict):
        return f"{len(value)} key{'s' if len(value) != 1 else ''}"
    return json.dumps(value)


def _is_empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


def meta_summary(*, universe, key: str, value: str) -> MetaSummary | None:
    """Return a summary of the JSON-object meta value `value` stored under `key`, or None."""
    if key not in SUMMARISED:
        return None
    try:
        document = json.loads(value)
    except (TypeError, ValueError):
        return None
    if not isinstance(document, dict):
        return None
    kind, extension = SUMMARISED[key]
    summary = MetaSummary(kind=kind, raw_chars=len(value))
    fields = document
    if key == character_card.CARD_META_KEY and isinstance(document.get("entry_id"), str):
        return _card_entry_summary(universe, document, summary)
    if key == character_card.CARD_META_KEY:
        summary.spec = " ".join(str(document[k]) for k in ("spec", "spec_version") if document.get(k))
        if isinstance(document.get("data"), dict):
            fields = document["data"]
    name = fields.get("name")
    summary.name = name if isinstance(name, str) else ""
    for field_name in sorted(fields):
        if field_name in ("spec", "spec_version") and fields is document:
            continue
        if _is_empty(fields[field_name]):
            summary.empty_fields.append(field_name)
        else:
            summary.fields.append((field_name, _size(fields[field_name])))
    summary.book_entries = universe.lore_entries.filter(extensions__has_key=extension).count()
    if key == character_card.CARD_META_KEY:
        summary.card_fields = readable_fields(fields)
    return summary


def readable_fields(data: dict[str, Any]) -> list[tuple[str, Any, bool]]:
    """Return (label, value, is a list) for the card fields that are not empty, known ones first."""
    out = []
    known = dict(card_fields_module.FIELD_LABELS)
    for name, label in card_fields_module.FIELD_LABELS:
        value = data.get(name)
        if isinstance(value, str) and value.strip():
            out.append((label, value, False))
        elif isinstance(value, list) and value:
            out.append((label, [v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in value], True))
    for name in sorted(data):
        if name not in known and name != "character_book" and not _is_empty(data[name]):
            value = data[name]
            out.append(
                (
                    name,
                    value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True),
                    False,
                )
            )
    return out


def _card_entry_summary(universe, document: dict[str, Any], summary: MetaSummary) -> MetaSummary:
    entry = universe.lore_entries.filter(entry_id=document["entry_id"]).first()
    summary.spec = str(document.get("spec") or "")
    summary.name = str(document.get("name") or "")
    if entry is None:
        summary.fields = [("entry_id", f"{document['entry_id']} (the entry no longer exists)")]
        return summary
    summary.entry_id, summary.name = entry.entry_id, entry.title
    data, record = card_fields_module.current_data(entry)
    summary.card_fields = readable_fields(data)
    portrait = record.get("portrait")
    if isinstance(portrait, dict) and isinstance(portrait.get("bytes"), int):
        summary.portrait_bytes = portrait["bytes"]
    summary.book_entries = universe.lore_entries.filter(extensions__card=entry.entry_id).count()
    return summary
