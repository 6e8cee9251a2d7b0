"""Per-character belief missions (engine API `axiom.missions`).

A belief mission is a memory style for the consolidator: what a character tends to remember
(a rancorous NPC remembers betrayals, a merchant transactions). Missions live in
Universe_Meta, and are copied into each save's `meta` at creation:

- `belief_mission`: the universe-wide default mission (one string);
- `belief_missions`: JSON {entity_name: mission}, per-character overrides.

Reading degrades gracefully: missing, blank or malformed values give sensible empties, so the
consolidator always has something usable. The store is the Django database: where the engine
API takes `db_path`, these functions take the `universe` (a Universe or its pk), or a Save,
whose copied meta is read instead.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "BELIEF_MISSION_KEY",
    "BELIEF_MISSIONS_KEY",
    "get_universe_mission",
    "get_belief_missions_from_value",
    "get_belief_missions",
    "parse_missions_text",
    "missions_to_text",
]

BELIEF_MISSION_KEY = "belief_mission"
BELIEF_MISSIONS_KEY = "belief_missions"


def _meta_value(universe: Any, key: str) -> str:
    """Return the raw meta value for `key` of a Universe, a universe pk, or a Save ("" if unset)."""
    from studio.world.models import Save, Universe, UniverseMeta

    if universe is None:
        return ""
    if isinstance(universe, Save):
        meta = universe.meta if isinstance(universe.meta, dict) else {}
        value = meta.get(key, "")
    else:
        universe_pk = universe.pk if isinstance(universe, Universe) else universe
        value = UniverseMeta.objects.filter(universe_id=universe_pk, key=key).values_list("value", flat=True).first()
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def get_universe_mission(universe) -> str:
    """Return the universe-wide default belief mission ("" when unset)."""
    return _meta_value(universe, BELIEF_MISSION_KEY).strip()


def get_belief_missions_from_value(raw: str) -> dict[str, str]:
    """Parse a `belief_missions` JSON value into {entity_name: mission}.

    Blank or malformed JSON, a non-object, non-string values and blank names or missions are
    dropped rather than raised. An already-decoded dict is accepted too.
    """
    if isinstance(raw, dict):
        data = raw
    else:
        if not isinstance(raw, str) or not raw.strip():
            return {}
        try:
            data = json.loads(raw)
        except (ValueError, TypeError):
            return {}
    if not isinstance(data, dict):
        return {}
    out: dict[str, str] = {}
    for name, mission in data.items():
        if not isinstance(name, str) or not isinstance(mission, str):
            continue
        name, mission = name.strip(), mission.strip()
        if name and mission:
            out[name] = mission
    return out


def get_belief_missions(universe) -> dict[str, str]:
    """Return the per-character missions as {entity_name: mission} from the database."""
    return get_belief_missions_from_value(_meta_value(universe, BELIEF_MISSIONS_KEY))


def parse_missions_text(text: str) -> dict[str, str]:
    """Parse a 'Name: mission' per-line block into {name: mission}.

    Lines without a colon, or with an empty name or mission, are skipped. The first colon
    splits, so a mission may itself contain colons. A later line for the same name wins.
    """
    out: dict[str, str] = {}
    for line in (text or "").splitlines():
        if ":" not in line:
            continue
        name, mission = line.split(":", 1)
        name, mission = name.strip(), mission.strip()
        if name and mission:
            out[name] = mission
    return out


def missions_to_text(missions: dict[str, str]) -> str:
    """Return the 'Name: mission' block for `missions` (inverse of `parse_missions_text`).

    Entries that `parse_missions_text` could not read back (blank names or missions, a colon
    in a name, line breaks) are normalised: line breaks become spaces, and entries whose name
    contains a colon or is blank are left out.
    """
    lines = []
    for name, mission in (missions or {}).items():
        name = " ".join(str(name).split())
        mission = " ".join(str(mission).split())
        if not name or not mission or ":" in name:
            continue
        lines.append(f"{name}: {mission}")
    return "\n".join(lines)
