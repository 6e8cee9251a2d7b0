"""Reading Universe-as-Code: `parse_document`, TOML text to a checked `UniverseDocument`.

`tomllib` reads the file; every table and field is then checked (the universe's slug, the
missions, the `[opening]` as the opening form checks it, each `[[lore]]` entry's id, kind,
keys, links, activation fields and extensions, the `[[memory_tests]]`), and a problem raises
`ImportFormatError` naming the line (`_line_of` finds it in the source) and the field. Nothing
is written here: `studio.universes.services.universe_import_document` writes a document. The
layout of the file is described in toml_io.py.
"""

from __future__ import annotations

import json
import re
import tomllib

from django.core.validators import validate_slug
from django.core.exceptions import ValidationError

from studio.universes.activation import activation_validate
from studio.universes.interchange import (
    MAX_ENTRIES,
    MAX_TEXT_CHARS,
    MAX_TITLE_CHARS,
    ImportFormatError,
    check_size,
    nesting_error,
    reject_deep,
    reject_nul,
    require_string_list,
)
from studio.universes.interchange.toml_document import (
    ACTIVATION_NAMES,
    BELIEF_MISSION,
    BELIEF_MISSIONS,
    FORMAT,
    LORE_FIELDS,
    VERSION,
    LoreDocument,
    UniverseDocument,
)
from studio.universes.memory_tests.toml import TABLE as TESTS_TABLE
from studio.universes.memory_tests.toml import parse_tests
from studio.world.models import LoreKind
from studio.universes.opening import (
    ALTERNATE_GREETINGS_META,
    FIRST_MESSAGE_META,
    OPENING_META_KEYS,
    SCENARIO_META,
    opening_problems,
)

_HEADER_RE = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\"' -]+?)\s*\]\]?\s*(#.*)?$")


def _line_of(source: str, *, table: str = "", index: int | None = None, key: str | None = None) -> int | None:
    """Find the line of `key` in `[table]` (or the `index`-th `[[table]]`); None if not found."""
    section, seen, header_line = "", -1, None
    key_re = re.compile(r'^\s*["\']?' + re.escape(key) + r'["\']?\s*=') if key else None
    for number, line in enumerate(source.splitlines(), start=1):
        match = _HEADER_RE.match(line)
        if match:
            section = match.group(2).replace('"', "").replace("'", "").strip()
            if section == table:
                if match.group(1) == "[[":
                    seen += 1
                if index is None or seen == index:
                    header_line = number
            continue
        in_target = section == table and (index is None or seen == index)
        if in_target and key_re and key_re.match(line):
            return number
    return header_line


class _Reader:
    def __init__(self, source: str):
        self.source = source

    def fail(self, message: str, *, table: str = "", index: int | None = None, key: str | None = None):
        line = _line_of(self.source, table=table, index=index, key=key)
        where = f"line {line}: " if line else ""
        raise ImportFormatError(f"{where}{message}")

    def text(
        self,
        data: dict,
        key: str,
        label: str,
        *,
        table: str = "",
        index: int | None = None,
        required: bool = True,
        limit: int = MAX_TEXT_CHARS,
        allow_empty: bool = True,
    ) -> str | None:
        if key not in data:
            if required:
                self.fail(f"{label}: missing (it is required).", table=table, index=index)
            return None
        value = data[key]
        if not isinstance(value, str):
            self.fail(f"{label}: expected a string, got {type(value).__name__}.", table=table, index=index, key=key)
        if len(value) > limit:
            self.fail(f"{label}: {len(value):,} characters; the limit is {limit:,}.", table=table, index=index, key=key)
        if not allow_empty and not value.strip():
            self.fail(f"{label}: must not be empty.", table=table, index=index, key=key)
        return value


def parse_document(data: bytes | str) -> UniverseDocument:
    """Parse and validate Universe-as-Code TOML; raise ImportFormatError naming line and field."""
    if isinstance(data, bytes):
        check_size(data)
        try:
            source = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ImportFormatError(f"The file is not UTF-8 text (byte {exc.start}).") from exc
    else:
        source = data
        check_size(source.encode("utf-8"))
    try:
        doc = tomllib.loads(source)
    except tomllib.TOMLDecodeError as exc:
        raise ImportFormatError(f"Not valid TOML: {exc}.") from exc
    except RecursionError:
        raise nesting_error("Not valid TOML") from None
    reject_deep(doc, "Not valid TOML")
    reader = _Reader(source)
    try:
        reject_nul(doc, "document")
    except ImportFormatError as exc:
        reader.fail(str(exc))

    unknown = sorted(set(doc) - {"format", "version", "universe", "missions", "opening", "extra", "lore", TESTS_TABLE})
    if unknown:
        reader.fail(f"unknown top-level field “{unknown[0]}”.", key=unknown[0], table="")
    if doc.get("format") != FORMAT:
        reader.fail(f'format: expected "{FORMAT}", got {doc.get("format")!r}.', key="format")
    if doc.get("version") != VERSION:
        reader.fail(f"version: this studio reads version {VERSION}, got {doc.get('version')!r}.", key="version")

    universe = doc.get("universe")
    if not isinstance(universe, dict):
        reader.fail("[universe]: missing table (slug, name, description).")
    for key in sorted(set(universe) - {"slug", "name", "description"}):
        reader.fail(f"universe.{key}: unknown field.", table="universe", key=key)
    slug = reader.text(universe, "slug", "universe.slug", table="universe", limit=80, allow_empty=False)
    try:
        validate_slug(slug)
    except ValidationError:
        reader.fail(f"universe.slug: “{slug}” is not a slug (letters, digits, - and _).", table="universe", key="slug")
    name = reader.text(universe, "name", "universe.name", table="universe", limit=200, allow_empty=False)
    description = reader.text(universe, "description", "universe.description", table="universe", required=False) or ""

    missions = doc.get("missions", {})
    if not isinstance(missions, dict):
        reader.fail("missions: expected a table.", key="missions")
    for key in sorted(set(missions) - {"universe", "characters"}):
        reader.fail(
            f"missions.{key}: unknown field (use universe or [missions.characters]).", table="missions", key=key
        )
    universe_mission = reader.text(
        missions, "universe", "missions.universe", table="missions", required=False, limit=4000
    )
    characters = missions.get("characters")
    if characters is not None:
        if not isinstance(characters, dict):
            reader.fail(
                'missions.characters: expected a table of "Name" = "mission".', table="missions", key="characters"
            )
        for character, mission in characters.items():
            label = f"missions.characters.{character}"
            if not character.strip() or ":" in character or "\n" in character:
                reader.fail(
                    f"{label}: a name must be non-empty, without colon or line break.",
                    table="missions.characters",
                    key=character,
                )
            if not isinstance(mission, str) or not mission.strip():
                reader.fail(f"{label}: the mission must be non-empty text.", table="missions.characters", key=character)

    extra = doc.get("extra", {})
    if not isinstance(extra, dict):
        reader.fail('extra: expected a table of meta key = "value".', key="extra")
    for key, value in extra.items():
        if key in (BELIEF_MISSION, BELIEF_MISSIONS) and not (key == BELIEF_MISSIONS and characters is None):
            reader.fail(f"extra.{key}: belongs in [missions].", table="extra", key=key)
        if not re.match(r"^[A-Za-z0-9_.\-]{1,200}$", key):
            reader.fail(
                f"extra.{key}: a meta key uses letters, digits, dots, dashes, underscores.", table="extra", key=key
            )
        if not isinstance(value, str):
            reader.fail(f"extra.{key}: expected a string, got {type(value).__name__}.", table="extra", key=key)

    opening = _opening_table(doc, reader, extra)

    lore_tables = doc.get("lore", [])
    if not isinstance(lore_tables, list):
        reader.fail("lore: expected [[lore]] tables.", key="lore")
    if len(lore_tables) > MAX_ENTRIES:
        reader.fail(f"lore: {len(lore_tables)} entries; the limit is {MAX_ENTRIES}.")
    lore: list[LoreDocument] = []
    ids: set[str] = set()
    for index, table in enumerate(lore_tables):
        loc = {"table": "lore", "index": index}
        if not isinstance(table, dict):
            reader.fail(f"lore[{index}]: expected a table.", key="lore")
        for key in table:
            if key not in LORE_FIELDS:
                reader.fail(f"lore[{index}].{key}: unknown field.", key=key, **loc)
        entry_id = reader.text(table, "entry_id", f"lore[{index}].entry_id", limit=120, allow_empty=False, **loc)
        label = f"lore[{index}] ({entry_id})"
        try:
            validate_slug(entry_id)
        except ValidationError:
            reader.fail(f"{label}.entry_id: not a slug (letters, digits, - and _).", key="entry_id", **loc)
        if entry_id in ("new", "bulk", "status", "deleted"):
            reader.fail(f"{label}.entry_id: “{entry_id}” is reserved by the studio's pages.", key="entry_id", **loc)
        if entry_id in ids:
            reader.fail(f"{label}.entry_id: used twice in this file.", key="entry_id", **loc)
        ids.add(entry_id)
        title = reader.text(table, "title", f"{label}.title", limit=MAX_TITLE_CHARS, allow_empty=False, **loc)
        kind = reader.text(table, "kind", f"{label}.kind", limit=20, **loc)
        if kind not in LoreKind.values:
            reader.fail(f"{label}.kind: “{kind}” is not one of {', '.join(LoreKind.values)}.", key="kind", **loc)
        text = reader.text(table, "text", f"{label}.text", required=False, **loc) or ""
        try:
            keys = require_string_list(table.get("keys", []), f"{label}.keys")
            links = require_string_list(table.get("links", []), f"{label}.links")
        except ImportFormatError as exc:
            reader.fail(str(exc), key="keys" if "keys" in str(exc) else "links", **loc)
        extensions = table.get("extensions", {})
        if "extensions_json" in table:
            if "extensions" in table:
                reader.fail(f"{label}: give extensions or extensions_json, not both.", key="extensions_json", **loc)
            raw = reader.text(table, "extensions_json", f"{label}.extensions_json", **loc)
            try:
                extensions = json.loads(raw)
                reject_deep(extensions, f"{label}.extensions_json")
            except json.JSONDecodeError as exc:
                reader.fail(f"{label}.extensions_json: not JSON ({exc.msg}).", key="extensions_json", **loc)
            except RecursionError:
                reader.fail(str(nesting_error(f"{label}.extensions_json")), key="extensions_json", **loc)
            except ImportFormatError as exc:
                reader.fail(str(exc), key="extensions_json", **loc)
        if not isinstance(extensions, dict):
            reader.fail(f"{label}.extensions: expected a table.", key="extensions", **loc)
        given = {name: table[name] for name in ACTIVATION_NAMES if name in table}
        try:
            activation = activation_validate(given, strict_keys=True, primary_keys=keys)
        except ValidationError as exc:
            name, messages = next(iter(exc.message_dict.items()))
            reader.fail(f"{label}.{name}: {' '.join(messages)}", key=name if name in table else "keys", **loc)
        known_by = None
        if "known_by" in table:
            try:
                known_by = require_string_list(table["known_by"], f"{label}.known_by")
            except ImportFormatError as exc:
                reader.fail(str(exc), key="known_by", **loc)
        lore.append(LoreDocument(entry_id, title, kind, text, keys, links, extensions, activation, known_by))
    for index, entry in enumerate(lore):
        for link in entry.links:
            if link not in ids:
                reader.fail(
                    f"lore[{index}] ({entry.entry_id}).links: “{link}” is not an entry_id in this file.",
                    table="lore",
                    index=index,
                    key="links",
                )
    return UniverseDocument(
        slug=slug,
        name=name,
        description=description,
        universe_mission=universe_mission,
        character_missions=dict(characters) if characters is not None else None,
        extra=dict(extra),
        lore=lore,
        source=source,
        opening=opening,
        memory_tests=parse_tests(doc, reader, ids),
    )


def _opening_table(doc: dict, reader, extra: dict) -> dict[str, str]:
    """The [opening] table as meta values (the opening's keys, checked as the opening form checks them)."""
    table = doc.get("opening")
    if table is None:
        return {}
    if not isinstance(table, dict):
        reader.fail("opening: expected a table (first_message, alternate_greetings, scenario).", key="opening")
    for key in sorted(set(table) - {"first_message", "alternate_greetings", "scenario"}):
        reader.fail(f"opening.{key}: unknown field.", table="opening", key=key)
    for key in OPENING_META_KEYS:
        if key in extra:
            reader.fail(f"extra.{key}: belongs in [opening].", table="extra", key=key)
    first = reader.text(table, "first_message", "opening.first_message", table="opening", required=False) or ""
    scenario = reader.text(table, "scenario", "opening.scenario", table="opening", required=False) or ""
    try:
        greetings = require_string_list(table.get("alternate_greetings", []), "opening.alternate_greetings")
    except ImportFormatError as exc:
        reader.fail(str(exc), table="opening", key="alternate_greetings")
    problems = opening_problems(first_message=first.strip(), alternate_greetings=greetings, scenario=scenario.strip())
    for name, problem in problems.items():
        reader.fail(f"opening.{name}: {problem}", table="opening", key=name)
    values = {
        FIRST_MESSAGE_META: first.strip(),
        SCENARIO_META: scenario.strip(),
        ALTERNATE_GREETINGS_META: json.dumps(greetings, ensure_ascii=False) if greetings else "",
    }
    return {key: value for key, value in values.items() if value}
