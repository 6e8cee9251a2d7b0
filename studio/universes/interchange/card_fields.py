"""A Character Card's own fields: the Character entry they become, the V1 mirror, the portrait.

Where a card's fields live in the studio (one Character entry per imported card):

- `name` -> the entry's title (and its first key, so the entry fires on the name; a V3
  `nickname` is a second key);
- `description`, `personality`, `scenario` -> the entry's text, as the description followed
  by `## Personality` and `## Scenario` sections (only those that are not empty), so the
  narrator and retrieval see what the character is like;
- every other field (`first_mes`, `alternate_greetings`, `mes_example`, `creator_notes`,
  `system_prompt`, `post_history_instructions`, `tags`, `creator`, `character_version`,
  `extensions`, the V3 fields...) -> verbatim in `extensions["character_card"]["data"]`,
  with `spec` / `spec_version`, the book's own fields (`book`), the V1 top-level fields the
  file carried (`v1`) and the portrait's reference (`portrait`).

Export rebuilds `data` from the entry: title, description, personality and scenario come
from the entry as it is now (if the text is still exactly what the import composed, the
stored values are used, so nothing is re-split), the rest from the stored fields. The V1
top-level mirror fields SillyTavern writes (`name`, `description`, `personality`,
`scenario`, `first_mes`, `mes_example`, `creatorcomment`, `tags`, `avatar`, `chat`,
`talkativeness`, `fav`, `create_date`) are written beside `spec` / `spec_version` / `data`;
a mirror field whose `data` value has not changed since the import is written as the file
had it, so an import -> export round trip gives every field its value back.

The portrait: a PNG card's file is kept byte for byte (`portraits.py`); the PNG export
takes those bytes, drops the old `chara` / `ccv3` text chunks and inserts the new ones just
before `IEND`, so every other chunk (the image itself) is unchanged.
"""

from __future__ import annotations

from typing import Any


CHARACTER_EXTENSION = "character_card"  # LoreEntry.extensions key of a Character entry's card
CARD_TAG_EXTENSION = "card"  # LoreEntry.extensions key: entry_id of the card a book entry came from
SECTIONS = (("personality", "## Personality"), ("scenario", "## Scenario"))
TEXT_FIELDS = ("description", "personality", "scenario")
# V1 top-level field -> the `data` field it mirrors (SillyTavern's charaFormatData).
V1_MIRROR = (
    ("name", "name"),
    ("description", "description"),
    ("personality", "personality"),
    ("scenario", "scenario"),
    ("first_mes", "first_mes"),
    ("mes_example", "mes_example"),
    ("creatorcomment", "creator_notes"),
    ("tags", "tags"),
)
# V1 fields without a `data` twin (SillyTavern keeps talkativeness / fav also in data.extensions).
V1_DEFAULTS: dict[str, Any] = {"avatar": "none", "chat": "", "talkativeness": "0.5", "fav": False}
# How the Metadata page and the import report name the fields, in display order.
FIELD_LABELS = (
    ("name", "Name"),
    ("nickname", "Nickname"),
    ("description", "Description"),
    ("personality", "Personality"),
    ("scenario", "Scenario"),
    ("first_mes", "First message"),
    ("alternate_greetings", "Alternate greetings"),
    ("group_only_greetings", "Group-only greetings"),
    ("mes_example", "Example dialogue"),
    ("creator_notes", "Creator notes"),
    ("system_prompt", "System prompt"),
    ("post_history_instructions", "Post-history instructions"),
    ("tags", "Tags"),
    ("creator", "Creator"),
    ("character_version", "Character version"),
)


# --- the entry's text ----------------------------------------------------------------------


def compose_text(data: dict[str, Any]) -> str:
    """Return the Character entry's text: the description, then the non-empty sections."""
    parts = [_text(data.get("description"))]
    for field_name, header in SECTIONS:
        value = _text(data.get(field_name))
        if value:
            parts.append(f"{header}\n{value}")
    return "\n\n".join(part for part in parts if part)


def split_text(text: str) -> dict[str, str]:
    """Return description / personality / scenario from a Character entry's text."""
    out = {name: "" for name in TEXT_FIELDS}
    current, lines = "description", []
    headers = {header: name for name, header in SECTIONS}
    for line in text.split("\n"):
        if line.rstrip() in headers:
            out[current] = "\n".join(lines).strip("\n")
            current, lines = headers[line.rstrip()], []
        else:
            lines.append(line)
    out[current] = "\n".join(lines).strip("\n")
    return out


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


# --- import side ---------------------------------------------------------------------------


def card_record(doc: dict[str, Any], data: dict[str, Any], book_fields: dict[str, Any] | None) -> dict[str, Any]:
    """Return what a Character entry keeps of a card (`extensions["character_card"]`)."""
    record: dict[str, Any] = {
        "spec": doc.get("spec"),
        "spec_version": doc.get("spec_version"),
        "data": {k: v for k, v in data.items() if k != "character_book"},
        "v1": {k: v for k, v in doc.items() if k not in ("spec", "spec_version", "data")},
    }
    if book_fields is not None:
        record["book"] = book_fields
    return record


def entry_fields(record: dict[str, Any]) -> dict[str, Any]:
    """Return the Character entry's title, text and keys for a card record."""
    data = record["data"]
    name = _text(data.get("name")).strip() or "Unnamed character"
    keys = [name]
    nickname = _text(data.get("nickname")).strip()
    if nickname and nickname.casefold() != name.casefold():
        keys.append(nickname)
    return {"title": name[:300], "text": compose_text(data), "keys": keys}


# --- export side ---------------------------------------------------------------------------


def current_data(entry) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return (data as the entry holds it now, the record stored at import) for a Character entry."""
    record = (entry.extensions or {}).get(CHARACTER_EXTENSION) or {}
    stored = dict(record.get("data") or {})
    data = dict(stored)
    if entry.text != compose_text(stored):
        data.update(split_text(entry.text))
    if "name" not in stored or entry.title != entry_fields({"data": stored})["title"]:
        data["name"] = entry.title
    return data, record


def v1_fields(data: dict[str, Any], record: dict[str, Any], *, create_date: str) -> dict[str, Any]:
    """Return the V1 top-level mirror fields for `data` (as the file had them where unchanged)."""
    stored_v1 = record.get("v1") or {}
    stored_data = record.get("data") or {}
    extensions = data.get("extensions") if isinstance(data.get("extensions"), dict) else {}
    out: dict[str, Any] = {}
    for top, inner in V1_MIRROR:
        value = data.get(inner, [] if inner == "tags" else "")
        if top in stored_v1 and stored_data.get(inner) == data.get(inner):
            value = stored_v1[top]
        out[top] = value
    for top, default in V1_DEFAULTS.items():
        if top in stored_v1:
            out[top] = stored_v1[top]
        elif top in extensions:
            out[top] = extensions[top]
        else:
            out[top] = default
    out["create_date"] = stored_v1.get("create_date", create_date)
    for top, value in stored_v1.items():  # anything else the file carried at the top level
        out.setdefault(top, value)
    return out


def st_date(moment) -> str:
    """SillyTavern's create_date format, e.g. "2026-12-1 @13h 05m 09s 123ms"."""
    return (
        f"{moment.year}-{moment.month}-{moment.day} @{moment.hour:02d}h {moment.minute:02d}m "
        f"{moment.second:02d}s {moment.microsecond // 1000:03d}ms"
    )
