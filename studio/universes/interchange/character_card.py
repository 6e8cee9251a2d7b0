"""Character Cards (V1 / V2 / V3) and their `character_book`, as JSON or inside a PNG card.

A PNG card carries the card JSON, base64-encoded, in a `tEXt` chunk named `chara` (V2) or
`ccv3` (V3; preferred when both are present). The chunks are read by walking the PNG
structure directly: the image itself is never decoded, so a decompression bomb in the pixel
data costs nothing; compressed text chunks (`zTXt`, compressed `iTXt`) are inflated with a
hard output limit, and files over the import limit are refused before reading.

Mapping (studio <- character_book entry): title <- `name` (else `comment`, else the first
key, else "Entry <id>"), text <- `content` without its decorator lines, keys <- `keys`
(as `/pattern/` regex keys when `use_regex` is true). The activation columns come from the
spec's fields and from the `extensions` fields SillyTavern writes into a card
(`CC_MAPS`, read from world-info.js convertCharacterBook), then the CCv3 decorators at the
start of `content` override them (`@@activate`, `@@dont_activate`, `@@depth`,
`@@scan_depth`, `@@role`, `@@position`, `@@activate_only_after`, `@@activate_only_every`,
`@@keep_activate_after_match`, `@@dont_activate_after_match`, `@@additional_keys`,
`@@exclude_keys`, `@@ignore_on_max_context`, with `@@@` fallbacks). Every field is also kept
verbatim in `LoreEntry.extensions["character_book"]` and the decorator lines in
`extensions["decorators"]`; export writes changed columns back and keeps the rest, so
import -> export loses nothing. A card's own fields and its book's fields other than
`entries` travel in `IncomingBook.card` (the Character entry keeps them; `card_fields`
says where each goes); a bare book's fields go to the `character_book` meta key. The
studio's entry_id, kind and links travel in each entry's `extensions.axiom`.

This module reads cards and books (`parse_card`, `book_from_card`) and maps one book entry to
and from the studio's columns (`decode_entry`, `encode_entry`); writing a card, a book or a
PNG card is card_export.py's.
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
from studio.universes.interchange import card_kinds
from studio.universes.interchange.codec import (
    CCV3_SUPPORTED,
    DECORATOR_COLUMN_OF,
    DECORATOR_ONLY_DEFAULTS,
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
from studio.memory.lore_activation import MAX_SCAN_DEPTH, META_RECURSION_DEPTH, META_SCAN_DEPTH, META_TOKEN_BUDGET
from studio.universes.interchange import card_fields
from studio.universes.interchange.card_png import PNG_SIGNATURE, card_json_from_png
from studio.world.models import LoreKind

EXTENSION = "character_book"
CARD_META_KEY = "character_card"
BOOK_META_KEY = "character_book"


# --- activation fields -------------------------------------------------------------------


def _position(value: Any) -> int:
    # world-info.js convertCharacterBook: extensions.position ?? (position === 'before_char' ? before : after)
    if value == "before_char":
        return 0
    if isinstance(value, str):
        return 1
    return as_int(1, 0, 7)(value)


def _delay_level(value: Any) -> int:
    if value is True:
        return 1
    return as_int(0, 0, 1000)(value) if value else 0


CC_MAPS: tuple[FieldMap, ...] = (
    FieldMap("enabled", (("enabled",),), as_bool, bool, True),
    FieldMap("constant", (("constant",),), as_bool, bool, False),
    FieldMap("selective", (("selective",),), as_bool, bool, False),
    FieldMap("secondary_keys", (("secondary_keys",),), as_key_list, list, []),
    FieldMap("insertion_order", (("insertion_order",),), as_int(100), int, 100),
    FieldMap("priority", (("priority",),), as_optional_int(), identity, None),
    FieldMap(
        "case_sensitive", (("case_sensitive",), ("extensions", "case_sensitive")), as_optional_bool, identity, None
    ),
    FieldMap("position", (("extensions", "position"), ("position",)), _position, int, 1),
    FieldMap("depth", (("extensions", "depth"),), as_int(4, 0, 10000), int, 4),
    FieldMap("role", (("extensions", "role"),), as_optional_int(0, 2), identity, None),
    FieldMap("probability", (("extensions", "probability"),), as_int(100, 0, 100), int, 100),
    FieldMap("use_probability", (("extensions", "useProbability"),), as_bool, bool, True),
    FieldMap("selective_logic", (("extensions", "selectiveLogic"),), as_int(0, 0, 3), int, 0),
    FieldMap("inclusion_group", (("extensions", "group"),), as_text, str, ""),
    FieldMap("group_prioritize", (("extensions", "group_override"),), as_bool, bool, False),
    FieldMap("group_weight", (("extensions", "group_weight"),), as_int(100, 0), int, 100),
    FieldMap("group_scoring", (("extensions", "use_group_scoring"),), as_optional_bool, identity, None),
    FieldMap("scan_depth", (("extensions", "scan_depth"),), as_optional_int(0, 1000), identity, None),
    FieldMap("match_whole_words", (("extensions", "match_whole_words"),), as_optional_bool, identity, None),
    FieldMap("exclude_recursion", (("extensions", "exclude_recursion"),), as_bool, bool, False),
    FieldMap("prevent_recursion", (("extensions", "prevent_recursion"),), as_bool, bool, False),
    FieldMap("delay_until_recursion", (("extensions", "delay_until_recursion"),), _delay_level, int, 0),
    FieldMap("vectorized", (("extensions", "vectorized"),), as_bool, bool, False),
    FieldMap("sticky", (("extensions", "sticky"),), as_int(0, 0), int, 0),
    FieldMap("cooldown", (("extensions", "cooldown"),), as_int(0, 0), int, 0),
    FieldMap("delay", (("extensions", "delay"),), as_int(0, 0), int, 0),
    FieldMap("ignore_budget", (("extensions", "ignore_budget"),), as_bool, bool, False),
)
ACTING_TOP = {"keys", "content", "use_regex", *(p[0] for m in CC_MAPS for p in m.paths if len(p) == 1)}
ACTING_EXTENSIONS = {p[1] for m in CC_MAPS for p in m.paths if len(p) == 2}


def _regex_key(pattern: str) -> str:
    return "/" + pattern.replace("/", "\\/") + "/"


def _plain_pattern(key: str) -> str | None:
    if len(key) >= 2 and key.startswith("/") and key.endswith("/"):
        return key[1:-1].replace("\\/", "/")
    return None


def decode_entry(
    raw: dict[str, Any], content: str, keys: list[str]
) -> tuple[str, list[str], dict[str, Any], list[str], list[str], list[str]]:
    """Return (text, keys, activation columns, acting, kept, warnings) for one book entry."""
    lines, text = split_decorators(content)
    acting_decorators, kept_lines = effective_decorators(lines, CCV3_SUPPORTED)
    columns, read = decode_fields(raw, CC_MAPS)
    warnings: list[str] = []
    if raw.get("use_regex") is True:
        # CCv3 use_regex: keys are patterns; secondary_keys and constant SHOULD be ignored.
        keys = [_regex_key(k) for k in keys]
        if columns["secondary_keys"] or columns["constant"]:
            warnings.append("use_regex is on: secondary_keys and constant are ignored (CCv3)")
        columns["secondary_keys"], columns["constant"] = [], False
    columns.update(decorator_columns(acting_decorators))
    acting = [
        "keys",
        "content",
        *read,
        *(["use_regex"] if "use_regex" in raw else []),
        *(f"@@{name}" for name, _v, _i in acting_decorators),
    ]
    kept = [k for k in raw if k not in ACTING_TOP and k != "extensions"]
    kept += [f"extensions.{k}" for k in (raw.get("extensions") or {}) if k not in ACTING_EXTENSIONS]
    kept += [f"{line} (not supported)" for line in kept_lines]
    return text, keys, columns, acting, kept, warnings


def encode_entry(
    kept: dict[str, Any], lines: list[str], columns: dict[str, Any], keys: list[str], text: str
) -> dict[str, Any]:
    """Return the book entry for the studio's current columns (kept representation where unchanged)."""
    kept_keys = list(kept.get("keys") or []) if "keys" in kept else None
    _t, kept_decoded_keys, kept_columns, *_ = decode_entry(kept, join_decorators(lines, ""), kept_keys or [])
    new_lines = rebuild_decorators(lines, columns, CCV3_SUPPORTED, extra_names=tuple(DECORATOR_ONLY_DEFAULTS))
    acting, _ = effective_decorators(new_lines, CCV3_SUPPORTED)
    expressed = {c for name, _v, _i in acting for c in DECORATOR_COLUMN_OF.get(name, ())}
    item = encode_fields(kept, columns, CC_MAPS, kept_columns, skip=expressed)
    if "position" not in expressed and kept_columns.get("position") != columns["position"]:
        item.setdefault("extensions", {})
        if "position" in item and columns["position"] in (0, 1):
            item["position"] = "before_char" if columns["position"] == 0 else "after_char"
    use_regex = item.get("use_regex") is True
    if (
        use_regex
        and kept_keys is not None
        and kept_decoded_keys == keys
        and not columns["secondary_keys"]
        and not columns["constant"]
    ):
        item["keys"] = kept_keys
    elif (
        use_regex
        and keys
        and all(_plain_pattern(k) is not None for k in keys)
        and not columns["secondary_keys"]
        and not columns["constant"]
    ):
        item["keys"] = [_plain_pattern(k) for k in keys]
    else:
        if use_regex:
            item["use_regex"] = False  # regex keys travel as /pattern/ keys, as SillyTavern reads them
        item["keys"] = list(keys)
    item["content"] = join_decorators(new_lines, text)
    return item


# --- parsing -----------------------------------------------------------------------------


def derived_title(entry: dict[str, Any], entry_index: Any) -> str:
    for field_name in ("name", "comment"):
        value = entry.get(field_name)
        if isinstance(value, str) and value.strip():
            return value.strip()[:MAX_TITLE_CHARS]
    keys = [k for k in entry.get("keys") or [] if isinstance(k, str) and k.strip()]
    if not keys:
        return f"Entry {entry_index}"
    content = entry.get("content") if isinstance(entry.get("content"), str) else ""
    return card_kinds.title_from_key(keys[0], content)[:MAX_TITLE_CHARS]  # the card's spelling, not a lowercase key


def parse_card(data: bytes, *, filename: str = "") -> IncomingBook:
    """Read a Character Card (V2/V3 JSON or PNG) or a bare character_book JSON."""
    check_size(data)
    portrait = None
    if data.startswith(PNG_SIGNATURE) or filename.lower().endswith(".png"):
        doc = card_json_from_png(data)
        source, portrait = "Character Card PNG", data
    else:
        try:
            doc = json.loads(data.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ImportFormatError(f"The file is not UTF-8 text (byte {exc.start}).") from exc
        except json.JSONDecodeError as exc:
            raise ImportFormatError(f"Not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}.") from exc
        except RecursionError:
            raise nesting_error("Not valid JSON") from None
        source = "Character Card JSON"
    book = book_from_card(doc, source=source)
    if book.card is not None:
        book.portrait = portrait
    return book


def _v1_data(doc: dict[str, Any]) -> dict[str, Any]:
    """Return the `data` object of a V1 card (its fields at the top level, no spec)."""
    data = {inner: doc[top] for top, inner in card_fields.V1_MIRROR if top in doc}
    for name in (
        "alternate_greetings",
        "character_book",
        "creator",
        "character_version",
        "system_prompt",
        "post_history_instructions",
        "extensions",
        "creator_notes",
    ):
        if name in doc:
            data[name] = doc[name]
    return data


def _is_v1_card(doc: dict[str, Any]) -> bool:
    return (
        "spec" not in doc
        and isinstance(doc.get("name"), str)
        and any(k in doc for k in ("first_mes", "personality", "mes_example", "scenario", "description"))
    )


def book_from_card(doc: Any, *, source: str) -> IncomingBook:
    reject_deep(doc, "The card")
    reject_nul(doc, "card")
    if not isinstance(doc, dict):
        raise ImportFormatError(f"Expected a JSON object (a card or a character_book), got {type(doc).__name__}.")
    card_data: dict[str, Any] | None = None
    if doc.get("spec") in ("chara_card_v2", "chara_card_v3") or _is_v1_card(doc):
        card_data = doc.get("data") if "spec" in doc else _v1_data(doc)
        if not isinstance(card_data, dict):
            raise ImportFormatError(f'{doc["spec"]}: "data" must be an object.')
        for name in (
            "name",
            "description",
            "personality",
            "scenario",
            "first_mes",
            "mes_example",
            "creator_notes",
            "system_prompt",
            "post_history_instructions",
            "nickname",
        ):
            require_text(card_data.get(name, ""), f"data.{name}")
        for name in ("alternate_greetings", "tags", "group_only_greetings"):
            if card_data.get(name) is not None and (
                not isinstance(card_data[name], list) or not all(isinstance(x, str) for x in card_data[name])
            ):
                raise ImportFormatError(f"data.{name}: expected a list of strings.")
        book = card_data.get("character_book")
        if book is None:
            book = {"entries": []}
        where = "data.character_book"
        version = {"chara_card_v3": "V3", "chara_card_v2": "V2"}.get(doc.get("spec"), "V1")
        source = f"{source} ({version})"
    elif doc.get("spec") == "lorebook_v3":  # CCv3: a lorebook exported on its own
        book, where = doc.get("data"), "data"
        source = f"{source} (CCv3 lorebook)"
    elif "entries" in doc and isinstance(doc.get("entries"), list):
        book, where = doc, "character_book"
    elif "spec" in doc:
        raise ImportFormatError(f"Unsupported card spec {doc.get('spec')!r}; expected chara_card_v2 or chara_card_v3.")
    else:
        raise ImportFormatError(
            "Not a Character Card: expected spec chara_card_v2/v3 or a character_book with entries."
        )
    if not isinstance(book, dict):
        raise ImportFormatError(f"{where}: expected an object, got {type(book).__name__}.")
    raw_entries = book.get("entries")
    if not isinstance(raw_entries, list):
        raise ImportFormatError(f"{where}.entries: expected a list, got {type(raw_entries).__name__}.")
    if len(raw_entries) > MAX_ENTRIES:
        raise ImportFormatError(f"{where}.entries: {len(raw_entries)} entries; the limit is {MAX_ENTRIES}.")
    entries: list[IncomingEntry] = []
    seen_ids: set[str] = set()
    for index, raw in enumerate(raw_entries):
        at = f"{where}.entries[{index}]"
        if not isinstance(raw, dict):
            raise ImportFormatError(f"{at}: expected an object, got {type(raw).__name__}.")
        text = require_text(raw.get("content", ""), f"{at}.content")
        keys = require_string_list(raw.get("keys", []), f"{at}.keys")
        require_string_list(raw.get("secondary_keys", []), f"{at}.secondary_keys")
        for name_field in ("name", "comment"):
            require_text(raw.get(name_field, ""), f"{at}.{name_field}")
        for flag in ("enabled", "constant", "selective", "case_sensitive", "use_regex"):
            if flag in raw and raw[flag] is not None and not isinstance(raw[flag], bool):
                raise ImportFormatError(f"{at}.{flag}: expected true or false, got {raw[flag]!r}.")
        if "extensions" in raw and not isinstance(raw["extensions"], dict):
            raise ImportFormatError(f"{at}.extensions: expected an object.")
        entry_number = raw.get("id", index)
        kept = {k: v for k, v in raw.items() if k != "content"}
        axiom = {}
        extensions = kept.get("extensions")
        if isinstance(extensions, dict) and isinstance(extensions.get(AXIOM_EXTENSION), dict):
            axiom = extensions[AXIOM_EXTENSION]
            kept["extensions"] = {k: v for k, v in extensions.items() if k != AXIOM_EXTENSION}
        identity = None
        if "id" in raw and isinstance(raw["id"], (int, str)) and not isinstance(raw["id"], bool):
            identity = (EXTENSION, "id", raw["id"])
        text, keys, activation, acting, kept_fields, warnings = decode_entry(raw, text, keys)
        title = derived_title(raw, entry_number)
        kind = axiom.get("kind") if axiom.get("kind") in LoreKind.values else ""
        if not kind:  # where the card says it (interchange/card_kinds.py)
            kind, said_by = card_kinds.card_entry_kind(
                raw, title=title, keys=keys, card_name=str((card_data or {}).get("name") or "")
            )
            if kind:
                acting = [*acting, f"{said_by} → kind {kind}"]
        decorator_lines = split_decorators(raw.get("content") or "")[0]
        incoming_extensions = {EXTENSION: kept}
        if decorator_lines:
            incoming_extensions[DECORATOR_EXTENSION] = decorator_lines
        incoming = IncomingEntry(
            label=f"entry {index + 1} (id {entry_number})" if "id" in raw else f"entry {index + 1}",
            title=title,
            text=text,
            keys=keys,
            activation=activation,
            acting=acting,
            kept=kept_fields,
            warnings=warnings,
            entry_id=str(axiom.get("entry_id") or ""),
            kind=kind,
            links=[str(x) for x in axiom["links"]] if isinstance(axiom.get("links"), list) else None,
            known_by=known_by_from_extension(axiom),
            extensions=incoming_extensions,
            identity=identity,
        )
        if identity and str(raw["id"]) in seen_ids:
            incoming.skip_reason = f"id {raw['id']} appears twice in the book; the first one was imported"
        elif not text.strip() and not keys:
            incoming.skip_reason = "no content and no keys"
        if identity:
            seen_ids.add(str(raw["id"]))
        entries.append(incoming)
    meta, notes, record = {}, [], None
    book_fields = {k: v for k, v in book.items() if k != "entries"}
    if card_data is None:
        meta[BOOK_META_KEY] = json.dumps(book_fields, ensure_ascii=False, sort_keys=True)
    else:  # the card's fields and its book's own fields travel with the Character entry
        has_book = card_data.get("character_book") is not None
        record = card_fields.card_record(doc, card_data, book_fields if has_book else None)
    defaults = {}
    if (
        isinstance(book.get("scan_depth"), int)
        and not isinstance(book["scan_depth"], bool)
        and 0 <= book["scan_depth"] <= MAX_SCAN_DEPTH
    ):
        defaults[META_SCAN_DEPTH] = str(book["scan_depth"])
    if (
        isinstance(book.get("token_budget"), int)
        and not isinstance(book["token_budget"], bool)
        and 0 <= book["token_budget"] <= 1_000_000
    ):
        defaults[META_TOKEN_BUDGET] = str(book["token_budget"])
    if book.get("recursive_scanning") is False:
        defaults[META_RECURSION_DEPTH] = "0"  # CCv3: MUST NOT recurse
    return IncomingBook(source=source, entries=entries, meta=meta, notes=notes, defaults=defaults, card=record)
