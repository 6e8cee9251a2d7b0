"""Universe-as-Code: a whole universe (meta, missions, Lore Book) as one TOML file.

Layout (see docs/authoring.md)::

    format = "axiom-universe"
    version = 1

    [universe]            slug, name, description
    [missions]            universe = <belief_mission>
    [missions.characters] "Name" = "mission"          (belief_missions)
    [opening]             first_message, alternate_greetings (a list), scenario
    [extra]               every other Universe_Meta key, verbatim
    [[lore]]              entry_id, title, kind, keys, links, text, the activation
                          fields that differ from a new studio entry (activation.py),
                          then [lore.extensions] or extensions_json (see below)
    [[memory_tests]]      name, kind, turn, until, description, the kind's fields
                          (studio/universes/memory_tests/toml.py)

Export is deterministic: meta keys sorted, entries sorted by `entry_id`, links sorted,
extension objects sorted by key. Extensions TOML cannot hold (null, or integers beyond
64 bits) are written as one JSON string, `extensions_json`, so nothing is lost.
Reading uses `tomllib`; writing uses `tomli_w`. Errors name the line and the field.

This module writes a universe (`export_universe`) and compares a document with one
(`diff_document`); the document is toml_document.py's, the reading (`parse_document`, which
callers import from here too) toml_parse.py's.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from typing import Any

import tomli_w

from studio.universes.activation import STUDIO_DEFAULTS, activation_values
from studio.universes.interchange.toml_document import (
    BELIEF_MISSION,
    BELIEF_MISSIONS,
    FORMAT,
    VERSION,
    LoreDocument,
    UniverseDocument,
)
from studio.universes.interchange.toml_parse import parse_document  # noqa: F401  (re-exported: callers read here)
from studio.universes.memory_tests.toml import TABLE as TESTS_TABLE
from studio.universes.memory_tests.toml import tests_diff, tests_tables
from studio.world.models import LoreEntry, Universe
from studio.universes.opening import OPENING_META_KEYS, opening_from_meta
from studio.universes.selectors import with_link_ids


# --- export ------------------------------------------------------------------------------


def _sorted_deep(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _sorted_deep(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list):
        return [_sorted_deep(v) for v in value]
    return value


def _toml_representable(value: dict[str, Any]) -> bool:
    try:
        return tomllib.loads(tomli_w.dumps({"x": value})) == {"x": value}
    except (TypeError, ValueError, OverflowError):
        return False


def _character_missions(raw: str) -> dict[str, str] | None:
    """Return belief_missions as a dict if it is a clean JSON object of strings, else None."""
    try:
        data = json.loads(raw)
    except (TypeError, json.JSONDecodeError):
        return None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        return None
    return data


def _lore_table(entry: LoreEntry, links: list[str]) -> dict[str, Any]:
    table: dict[str, Any] = {
        "entry_id": entry.entry_id,
        "title": entry.title,
        "kind": entry.kind,
        "keys": list(entry.keys or []),
        "links": sorted(links),
        "text": entry.text,
    }
    if entry.known_by is not None:  # TOML has no null: absent means everyone
        table["known_by"] = list(entry.known_by)
    for name, value in activation_values(entry).items():
        if value != STUDIO_DEFAULTS[name]:
            table[name] = value  # only what differs from a new studio entry (None is always a default)
    extensions = _sorted_deep(entry.extensions or {})
    if extensions:
        if _toml_representable(extensions):
            table["extensions"] = extensions
        else:
            table["extensions_json"] = json.dumps(extensions, ensure_ascii=False, sort_keys=True)
    return table


def export_universe(universe: Universe, *, entries=None) -> str:
    """Return the universe (or only `entries` of it) as Universe-as-Code TOML text."""
    meta = {row.key: row.value for row in universe.meta.all()}
    document: dict[str, Any] = {"format": FORMAT, "version": VERSION}
    document["universe"] = {
        "slug": universe.slug,
        "name": universe.name,
        "description": universe.description,
    }
    missions: dict[str, Any] = {}
    if BELIEF_MISSION in meta:
        missions["universe"] = meta.pop(BELIEF_MISSION)
    if BELIEF_MISSIONS in meta:
        parsed = _character_missions(meta[BELIEF_MISSIONS])
        if parsed is not None:
            meta.pop(BELIEF_MISSIONS)
            missions["characters"] = parsed
    if missions:
        document["missions"] = missions
    opening = opening_from_meta(meta)
    if any(key in meta for key in OPENING_META_KEYS):
        table = {
            "first_message": opening.first_message,
            "alternate_greetings": opening.alternate_greetings,
            "scenario": opening.scenario,
        }
        document["opening"] = {name: value for name, value in table.items() if value}
        for key in OPENING_META_KEYS:  # meta_validate keeps alternate_greetings a JSON array of strings
            meta.pop(key, None)
    if meta:
        document["extra"] = {key: meta[key] for key in sorted(meta)}
    if entries is None:
        entries = universe.lore_entries.all()
    entries = sorted(
        with_link_ids(entries) if hasattr(entries, "prefetch_related") else entries, key=lambda e: e.entry_id
    )
    document["lore"] = [_lore_table(e, [link.entry_id for link in e.links.all()]) for e in entries]
    tests = tests_tables(universe)
    if tests:
        document[TESTS_TABLE] = tests
    header = "# Axiom Studio Universe-as-Code. Edit, then import it back: the studio shows a diff first.\n"
    return header + tomli_w.dumps(document, multiline_strings=True)


# --- diff preview ------------------------------------------------------------------------


@dataclass
class UniverseDiff:
    universe_changes: list[tuple[str, str, str]] = field(default_factory=list)  # field, old, new
    meta_added: list[tuple[str, str]] = field(default_factory=list)
    meta_changed: list[tuple[str, str, str]] = field(default_factory=list)
    meta_removed: list[tuple[str, str]] = field(default_factory=list)
    lore_created: list[LoreDocument] = field(default_factory=list)
    lore_changed: list[tuple[str, str, list[tuple[str, Any, Any]]]] = field(default_factory=list)
    lore_deleted: list[tuple[str, str]] = field(default_factory=list)
    lore_unchanged: int = 0
    tests_created: list[str] = field(default_factory=list)  # memory tests, by name
    tests_changed: list[str] = field(default_factory=list)
    tests_deleted: list[str] = field(default_factory=list)
    tests_unchanged: int = 0

    @property
    def is_empty(self) -> bool:
        return not (
            self.universe_changes
            or self.meta_added
            or self.meta_changed
            or self.meta_removed
            or self.lore_created
            or self.lore_changed
            or self.lore_deleted
            or self.tests_created
            or self.tests_changed
            or self.tests_deleted
        )

    @property
    def overwrites(self) -> bool:
        return bool(
            self.universe_changes
            or self.meta_changed
            or self.meta_removed
            or self.lore_changed
            or self.lore_deleted
            or self.tests_changed
            or self.tests_deleted
        )


def diff_document(universe: Universe, document: UniverseDocument) -> UniverseDiff:
    """Return what importing `document` would change in `universe`."""
    from studio.universes.services import lore_entry_snapshot

    diff = UniverseDiff()
    for name in ("name", "description"):
        old, new = getattr(universe, name), getattr(document, name)
        if old != new:
            diff.universe_changes.append((name, old, new))
    current = {row.key: row.value for row in universe.meta.all()}
    wanted = document.meta_values()
    for key in sorted(set(current) | set(wanted)):
        if key not in current:
            diff.meta_added.append((key, wanted[key]))
        elif key not in wanted:
            diff.meta_removed.append((key, current[key]))
        elif current[key] != wanted[key]:
            if key == BELIEF_MISSIONS and _character_missions(current[key]) == document.character_missions:
                continue  # same missions, only spelled differently
            diff.meta_changed.append((key, current[key], wanted[key]))
    existing = {e.entry_id: e for e in with_link_ids(universe.lore_entries.all())}
    wanted_ids = set()
    for lore in document.lore:
        wanted_ids.add(lore.entry_id)
        entry = existing.get(lore.entry_id)
        if entry is None:
            diff.lore_created.append(lore)
            continue
        before, after = lore_entry_snapshot(entry), lore.snapshot()
        changes = [(k, before[k], after[k]) for k in before if before[k] != after[k]]
        if changes:
            diff.lore_changed.append((lore.entry_id, entry.title, changes))
        else:
            diff.lore_unchanged += 1
    for entry_id in sorted(set(existing) - wanted_ids):
        diff.lore_deleted.append((entry_id, existing[entry_id].title))
    diff.tests_created, diff.tests_changed, diff.tests_deleted, diff.tests_unchanged = tests_diff(
        universe, document.memory_tests
    )
    return diff
