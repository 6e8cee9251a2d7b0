"""Universe-as-Code's document: what one TOML file describes, as read (toml_parse.py) and compared (toml_io.py).

`UniverseDocument` (the universe's name and description, missions, opening, the other meta
keys, the lore and the memory tests) and `LoreDocument` (one `[[lore]]` table), with the
file's format name and version and the fields a `[[lore]]` table may hold. The layout of the
file is described in toml_io.py.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from studio.universes.activation import FIELDS as ACTIVATION_FIELDS
from studio.universes.activation import STUDIO_DEFAULTS

FORMAT = "axiom-universe"
VERSION = 1
BELIEF_MISSION = "belief_mission"
BELIEF_MISSIONS = "belief_missions"
ACTIVATION_NAMES = tuple(f.name for f in ACTIVATION_FIELDS)
LORE_FIELDS = (
    "entry_id",
    "title",
    "kind",
    "keys",
    "links",
    "text",
    "known_by",
    *ACTIVATION_NAMES,
    "extensions",
    "extensions_json",
)


@dataclass
class LoreDocument:
    entry_id: str
    title: str
    kind: str
    text: str
    keys: list[str]
    links: list[str]
    extensions: dict[str, Any]
    activation: dict[str, Any] = field(default_factory=dict)  # the fields the file sets
    # Who knows the entry: absent from the file = everyone (None); [] = nobody but the narrator.
    known_by: list[str] | None = None

    def snapshot(self) -> dict[str, Any]:
        return {
            "entry_id": self.entry_id,
            "title": self.title,
            "kind": self.kind,
            "text": self.text,
            "keys": self.keys,
            "links": sorted(self.links),
            "extensions": self.extensions,
            "known_by": self.known_by,
            **STUDIO_DEFAULTS,
            **self.activation,
        }


@dataclass
class UniverseDocument:
    slug: str
    name: str
    description: str
    universe_mission: str | None
    character_missions: dict[str, str] | None
    extra: dict[str, str]
    lore: list[LoreDocument] = field(default_factory=list)
    source: str = ""
    opening: dict[str, str] = field(default_factory=dict)  # the [opening] table as meta values
    memory_tests: list = field(default_factory=list)  # the [[memory_tests]] tables, checked (MemoryTestSpec)

    def meta_values(self) -> dict[str, str]:
        """Return the Universe_Meta rows this document describes."""
        values = {**self.extra, **self.opening}
        if self.universe_mission is not None:
            values[BELIEF_MISSION] = self.universe_mission
        if self.character_missions is not None:
            values[BELIEF_MISSIONS] = json.dumps(self.character_missions, ensure_ascii=False)
        return values

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()
