"""SillyTavern world-info (lorebook) JSON: `{"entries": {"<uid>": {...}}, ...}`.

Mapping (studio <- SillyTavern): title <- `comment` (else the first `key`, else "Entry <uid>"),
text <- `content` without its leading decorator lines, keys <- `key`, and every activation
field SillyTavern acts on <- its column (`ST_MAPS` below; world-info.js field names). The
decorators SillyTavern knows (`@@activate`, `@@dont_activate`) act; other decorator lines
are kept (SillyTavern strips and ignores them). Everything else (`uid`, `comment`,
`displayIndex`, `addMemo`, `automationId`, `characterFilter`, `triggers`, any future field)
is kept verbatim in `LoreEntry.extensions["sillytavern"]`; top-level fields other than
`entries` go to the `sillytavern_world` meta key. Export writes each column back (the kept
representation when the value is unchanged, see codec.py), so import -> export gives the
same value for every field of every entry. The studio's own fields (entry_id, kind, links)
travel in the entry's `extensions.axiom` object.
"""

from __future__ import annotations

import json
from typing import Any

from studio.universes.interchange import (
    AXIOM_EXTENSION,
    known_by_from_extension,
    DECORATOR_EXTENSION,
    MAX_ENTRIES,
    MAX_TITLE_CHARS,
    ImportFormatError,
    IncomingBook,
    IncomingEntry,
    check_size,
    nesting_error,
    reject_deep,
    reject_nul,
    require_string_list,
    require_text,
)
from studio.universes.interchange.codec import (
    SILLYTAVERN_SUPPORTED,
    FieldMap,
    as_bool,
    as_int,
    as_key_list,
    as_optional_bool,
    as_optional_int,
    as_text,
    decode_fields,
    decorator_columns,
    effective_decorators,
    encode_fields,
    identity,
    join_decorators,
    rebuild_decorators,
    split_decorators,
)
from studio.memory.lore_activation import META_RECURSION_DEPTH, LoreDefaults
from studio.world.models import LoreKind

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


def _delay_level(value: Any) -> int:
    # world-info.js: delayUntilRecursion === true means level 1; a number is the level.
    if value is True:
        return 1
    return as_int(0, 0, 1000)(value) if value else 0


# world-info.js checkWorldInfo reads these; `missing` is what an absent field means there
# (e.g. `!entry.useProbability` skips the roll, `entry.selective && ...` skips secondary keys).
ST_MAPS: tuple[FieldMap, ...] = (
    FieldMap("secondary_keys", (("keysecondary",),), as_key_list, list, []),
    FieldMap("selective", (("selective",),), as_bool, bool, False),
    FieldMap("selective_logic", (("selectiveLogic",),), as_int(0, 0, 3), int, 0),
    FieldMap("constant", (("constant",),), as_bool, bool, False),
    FieldMap("enabled", (("disable",),), lambda v: not as_bool(v), lambda v: not v, True),
    FieldMap("insertion_order", (("order",),), as_int(100), int, 100),
    FieldMap("position", (("position",),), as_int(0, 0, 7), int, 0),
    FieldMap("depth", (("depth",),), as_int(4, 0, 10000), int, 4),
    FieldMap("role", (("role",),), as_optional_int(0, 2), identity, None),
    FieldMap("probability", (("probability",),), as_int(100, 0, 100), int, 100),
    FieldMap("use_probability", (("useProbability",),), as_bool, bool, False),
    FieldMap("inclusion_group", (("group",),), as_text, str, ""),
    FieldMap("group_prioritize", (("groupOverride",),), as_bool, bool, False),
    FieldMap("group_weight", (("groupWeight",),), as_int(100, 0), int, 100),
    FieldMap("group_scoring", (("useGroupScoring",),), as_optional_bool, identity, None),
    FieldMap("scan_depth", (("scanDepth",),), as_optional_int(0, 1000), identity, None),
    FieldMap("case_sensitive", (("caseSensitive",),), as_optional_bool, identity, None),
    FieldMap("match_whole_words", (("matchWholeWords",),), as_optional_bool, identity, None),
    FieldMap("sticky", (("sticky",),), as_int(0, 0), int, 0),
    FieldMap("cooldown", (("cooldown",),), as_int(0, 0), int, 0),
    FieldMap("delay", (("delay",),), as_int(0, 0), int, 0),
    FieldMap("exclude_recursion", (("excludeRecursion",),), as_bool, bool, False),
    FieldMap("prevent_recursion", (("preventRecursion",),), as_bool, bool, False),
    FieldMap("delay_until_recursion", (("delayUntilRecursion",),), _delay_level, int, 0),
    FieldMap("ignore_budget", (("ignoreBudget",),), as_bool, bool, False),
    FieldMap("vectorized", (("vectorized",),), as_bool, bool, False),
)
ACTING_FIELDS = {"key", "content", *(".".join(p) for m in ST_MAPS for p in m.paths)}
# Fields SillyTavern acts on that the studio only keeps: the report warns when they are set.
UNSUPPORTED_EFFECTS = {
    "characterFilter": "SillyTavern limits this entry to some characters; the studio does not filter",
    "triggers": "SillyTavern limits this entry to some generation types; the studio ignores that",
    "automationId": "SillyTavern runs a Quick Reply script; the studio does not",
    "outletName": "SillyTavern places this entry through an outlet macro; the studio keeps the name only",
    "matchPersonaDescription": "also scanned against the persona description in SillyTavern",
    "matchCharacterDescription": "also scanned against the character description in SillyTavern",
    "matchCharacterPersonality": "also scanned against the character personality in SillyTavern",
    "matchCharacterDepthPrompt": "also scanned against the character's note in SillyTavern",
    "matchScenario": "also scanned against the scenario in SillyTavern",
    "matchCreatorNotes": "also scanned against the creator's notes in SillyTavern",
}


def _has_value(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_value(v) for k, v in value.items() if k != "isExclude")
    return bool(value)


def decode_entry(raw: dict[str, Any], content: str) -> tuple[str, dict[str, Any], list[str], list[str], list[str]]:
    """Return (text, activation columns, acting fields, kept fields, warnings) for one entry."""
    lines, text = split_decorators(content)
    acting_decorators, kept_lines = effective_decorators(lines, SILLYTAVERN_SUPPORTED)
    columns, read = decode_fields(raw, ST_MAPS)
    columns.update(decorator_columns(acting_decorators))
    acting = ["key", "content", *read, *(f"@@{name}" for name, _v, _i in acting_decorators)]
    kept = [k for k in raw if k not in ACTING_FIELDS and k != "extensions"]
    kept += [f"{line} (SillyTavern ignores it)" for line in kept_lines]
    warnings = [f"{name}: {why}" for name, why in UNSUPPORTED_EFFECTS.items() if _has_value(raw.get(name))]
    return text, columns, acting, kept, warnings


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
    except RecursionError:
        raise nesting_error("Not valid JSON") from None
    return book_from_world_info(doc)


def book_from_world_info(doc: Any) -> IncomingBook:
    reject_deep(doc, "The file")
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
            if (
                number in raw
                and raw[number] is not None
                and (isinstance(raw[number], bool) or not isinstance(raw[number], (int, float)))
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
        text, activation, acting, kept_fields, warnings = decode_entry(raw, text)
        decorator_lines = split_decorators(raw.get("content") or "")[0]
        incoming_extensions = {EXTENSION: kept}
        if decorator_lines:
            incoming_extensions[DECORATOR_EXTENSION] = decorator_lines
        incoming = IncomingEntry(
            label=f"entry uid {uid}",
            title=derived_title(raw, uid),
            text=text,
            keys=keys,
            activation=activation,
            acting=acting,
            kept=kept_fields,
            warnings=warnings,
            entry_id=str(axiom.get("entry_id") or ""),
            kind=axiom.get("kind") if axiom.get("kind") in LoreKind.values else "",
            links=[str(x) for x in axiom["links"]] if isinstance(axiom.get("links"), list) else None,
            known_by=known_by_from_extension(axiom),
            extensions=incoming_extensions,
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
    # SillyTavern scans recursively unless its user turned it off (its shipped settings.json has
    # world_info_recursive: true; the file does not say): a universe without its own setting gets
    # the engine's default passes, the way the book was tuned.
    recursion = str(LoreDefaults().recursion_depth)
    return IncomingBook(
        source="SillyTavern world info",
        entries=entries,
        meta=meta,
        defaults={META_RECURSION_DEPTH: recursion},
        notes=[
            (
                "SillyTavern scans entries recursively by default (world_info_recursive: true in its "
                f"settings.json); lore recursion is {recursion} passes unless the universe set its own "
                "(Metadata page, lore_recursion_depth)."
            )
        ],
    )


def export_world_info(universe, entries) -> dict[str, Any]:
    """Return a SillyTavern world-info object for `entries` (model instances with links)."""
    from studio.universes.activation import activation_values
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
        columns = activation_values(entry)
        kept = (entry.extensions or {}).get(EXTENSION)
        lines = list((entry.extensions or {}).get(DECORATOR_EXTENSION) or [])
        if isinstance(kept, dict) and "uid" in kept and str(kept["uid"]) not in out:
            _text, kept_columns, *_ = decode_entry(kept, join_decorators(lines, ""))
            item = encode_fields(kept, columns, ST_MAPS, kept_columns)
            if entry.title != derived_title({**kept, "key": entry.keys}, kept["uid"]):
                item["comment"] = entry.title
        else:
            item = encode_fields(
                {"uid": next_uid, **DEFAULT_ENTRY, "comment": entry.title, "displayIndex": display_index},
                columns,
                ST_MAPS,
                {},
            )
            next_uid += 1
        lines = rebuild_decorators(lines, columns, SILLYTAVERN_SUPPORTED, extra_names=("forced",))
        item["key"] = list(entry.keys or [])
        item["content"] = join_decorators(lines, entry.text)
        extensions = dict(item.get("extensions") or {})
        extensions[AXIOM_EXTENSION] = lore_extension(entry)
        item["extensions"] = extensions
        out[str(item["uid"])] = item
    world["entries"] = out
    return world
