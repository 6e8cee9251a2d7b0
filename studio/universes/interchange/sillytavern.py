"""SillyTavern world-info (lorebook) JSON: `{"entries": {"<uid>": {...}}, ...}`.

Mapping (studio <- SillyTavern): title <- `comment` (else the first `key`, else "Entry <uid>"),
text <- `content`, keys <- `key`. Every other field of the entry (`uid`, `keysecondary`,
`constant`, `selective`, `selectiveLogic`, `order`, `position`, `disable`, `probability`,
`depth`, `group`, ... and any future one) is kept verbatim in
`LoreEntry.extensions["sillytavern"]`; top-level fields other than `entries` go to the
`sillytavern_world` meta key. Export overlays the studio's current title/text/keys on what
was kept, so re-export loses nothing. The studio's own fields (entry_id, kind, links) travel
in the entry's `extensions.axiom` object.
"""
from __future__ import annotations

import json
from typing import Any

from studio.universes.interchange import (
    AXIOM_EXTENSION,
    MAX_ENTRIES,
    MAX_TITLE_CHARS,
    ImportFormatError,
    IncomingBook,
    IncomingEntry,
    check_size,
    reject_nul,
    require_string_list,
    require_text,
)
from studio.universes.models import LoreKind

EXTENSION = "sillytavern"
META_KEY = "sillytavern_world"

# What SillyTavern writes for a new entry; used for entries that never came from it.
DEFAULT_ENTRY: dict[str, Any] = {
    "keysecondary": [],
    "constant": False,
    "vectorized": False,
    "selective": True,
    "selectiveLogic": 0,
    "addMemo": True,
    "order": 100,
    "position": 0,
    "disable": False,
    "excludeRecursion": False,
    "preventRecursion": False,
    "delayUntilRecursion": False,
    "probability": 100,
    "useProbability": True,
    "depth": 4,
    "group": "",
    "groupOverride": False,
    "groupWeight": 100,
    "scanDepth": None,
    "caseSensitive": None,
    "matchWholeWords": None,
    "useGroupScoring": None,
    "automationId": "",
    "role": None,
    "sticky": 0,
    "cooldown": 0,
    "delay": 0,
}


def derived_title(entry: dict[str, Any], uid: Any) -> str:
    """Return the title an entry gets on import: its comment, else its first key."""
    comment = (entry.get("comment") or "").strip()
    if comment:
        return comment[:MAX_TITLE_CHARS]
    keys = [k for k in entry.get("key") or [] if isinstance(k, str) and k.strip()]
    return keys[0].strip()[:MAX_TITLE_CHARS] if keys else f"Entry {uid}"


def parse_world_info(data: bytes) -> IncomingBook:
    """Read a SillyTavern world-info file; raise ImportFormatError on anything malformed."""
    check_size(data)
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"The file is not UTF-8 text (byte {exc.start}).") from exc
    except json.JSONDecodeError as exc:
        raise ImportFormatError(f"Not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}.") from exc
    return book_from_world_info(doc)


def book_from_world_info(doc: Any) -> IncomingBook:
    reject_nul(doc, "file")
    if not isinstance(doc, dict) or "entries" not in doc:
        raise ImportFormatError('Not a SillyTavern world-info file: expected an object with "entries".')
    raw_entries = doc["entries"]
    if isinstance(raw_entries, list):  # some exporters write a list; uids still identify entries
        raw_entries = {str(e.get("uid", i)) if isinstance(e, dict) else str(i): e for i, e in enumerate(raw_entries)}
    if not isinstance(raw_entries, dict):
        raise ImportFormatError(f'"entries": expected an object keyed by uid, got {type(raw_entries).__name__}.')
    if len(raw_entries) > MAX_ENTRIES:
        raise ImportFormatError(f'"entries": {len(raw_entries)} entries; the limit is {MAX_ENTRIES}.')
    entries: list[IncomingEntry] = []
    seen_uids: set[str] = set()
    for key, raw in raw_entries.items():
        where = f'entries["{key}"]'
        if not isinstance(raw, dict):
            raise ImportFormatError(f"{where}: expected an object, got {type(raw).__name__}.")
        uid = raw.get("uid", key)
        if isinstance(uid, bool) or not isinstance(uid, (int, str)):
            raise ImportFormatError(f"{where}.uid: expected a number, got {type(uid).__name__}.")
        text = require_text(raw.get("content", ""), f"{where}.content")
        keys = require_string_list(raw.get("key", []), f"{where}.key")
        require_string_list(raw.get("keysecondary", []), f"{where}.keysecondary")
        require_text(raw.get("comment", ""), f"{where}.comment")
        for flag in ("constant", "selective", "disable"):
            if flag in raw and raw[flag] is not None and not isinstance(raw[flag], bool):
                raise ImportFormatError(f"{where}.{flag}: expected true or false, got {raw[flag]!r}.")
        for number in ("order", "position", "depth", "probability"):
            if number in raw and raw[number] is not None and (
                isinstance(raw[number], bool) or not isinstance(raw[number], (int, float))
            ):
                raise ImportFormatError(f"{where}.{number}: expected a number, got {raw[number]!r}.")
        kept = {k: v for k, v in raw.items() if k not in ("content", "key")}
        kept["uid"] = uid
        axiom = {}
        extensions = kept.get("extensions")
        if isinstance(extensions, dict) and isinstance(extensions.get(AXIOM_EXTENSION), dict):
            axiom = extensions[AXIOM_EXTENSION]
            rest = {k: v for k, v in extensions.items() if k != AXIOM_EXTENSION}
            if rest:
                kept["extensions"] = rest
            else:
                kept.pop("extensions")
        incoming = IncomingEntry(
            label=f"entry uid {uid}",
            title=derived_title(raw, uid),
            text=text,
            keys=keys,
            entry_id=str(axiom.get("entry_id") or ""),
            kind=axiom.get("kind") if axiom.get("kind") in LoreKind.values else "",
            links=[str(x) for x in axiom["links"]] if isinstance(axiom.get("links"), list) else None,
            extensions={EXTENSION: kept},
            identity=(EXTENSION, "uid", uid),
        )
        if str(uid) in seen_uids:
            incoming.skip_reason = f"uid {uid} appears twice in the file; the first one was imported"
        elif not text.strip() and not keys:
            incoming.skip_reason = "no content and no keys"
        seen_uids.add(str(uid))
        entries.append(incoming)
    world = {k: v for k, v in doc.items() if k != "entries"}
    meta = {META_KEY: json.dumps(world, ensure_ascii=False, sort_keys=True)} if world else {}
    return IncomingBook(source="SillyTavern world info", entries=entries, meta=meta)


def export_world_info(universe, entries) -> dict[str, Any]:
    """Return a SillyTavern world-info object for `entries` (model instances with links)."""
    from studio.universes.services import lore_extension

    world: dict[str, Any] = {}
    raw_meta = universe.meta.filter(key=META_KEY).values_list("value", flat=True).first()
    if raw_meta:
        try:
            loaded = json.loads(raw_meta)
            if isinstance(loaded, dict):
                world.update(loaded)
        except json.JSONDecodeError:
            pass
    entries = sorted(entries, key=lambda e: e.entry_id)
    used: set[int | str] = set()
    for entry in entries:
        kept = (entry.extensions or {}).get(EXTENSION)
        if isinstance(kept, dict) and "uid" in kept:
            used.add(kept["uid"])
    next_uid = max([u for u in used if isinstance(u, int)], default=-1) + 1
    out: dict[str, Any] = {}
    for display_index, entry in enumerate(entries):
        kept = (entry.extensions or {}).get(EXTENSION)
        if isinstance(kept, dict) and "uid" in kept and str(kept["uid"]) not in out:
            item = dict(kept)
            if entry.title != derived_title({**kept, "key": entry.keys}, kept["uid"]):
                item["comment"] = entry.title
        else:
            item = {"uid": next_uid, **DEFAULT_ENTRY, "comment": entry.title, "displayIndex": display_index}
            next_uid += 1
        item["key"] = list(entry.keys or [])
        item["content"] = entry.text
        extensions = dict(item.get("extensions") or {})
        extensions[AXIOM_EXTENSION] = lore_extension(entry)
        item["extensions"] = extensions
        out[str(item["uid"])] = item
    world["entries"] = out
    return world
