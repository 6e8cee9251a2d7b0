"""The demo's second save: "Who knows what", the secrets of the Reach, from the bench's scenario.

The scenario (`bench/data/knowledge/scenario.json`, also what `bench/knowledge.py` measures)
is a 32-turn playthrough of the demo universe with the truth of who is present at each
turn and who knows each secret. Loading it:

- adds its secret Lore Book entries to the demo universe (kind `concept`, with `known_by`)
  through the lore services, so they carry revisions and queue their embedding like an
  author's import;
- re-makes the save `drowned-reach-knowledge` in living mode, turn by turn, through the
  same writes play uses (`turn_record`: every per-turn table's append hook; the turn's state
  `location`, `present`, `reveals` gives its presence and reveals), and the scenario's facts
  are stored as the extractor would have stored them (no LLM is called, no turn job is
  queued).

Idempotent: the save keeps the scenario's digest in its meta; a second load with the same
file changes nothing. Embedding the save is the caller's (`demo_embed`, after the commit).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from django.db import transaction

from studio.memory.facts import Fact, insert_facts
from studio.memory.knowledge.names import character_index
from studio.world.models import LoreEntry, LoreKind, MemoryMode, Save
from studio.saves.services import turn_record
from studio.universes.demo.loader import DemoDataError
from studio.universes.models import LoreRevision
from studio.universes.services.lore import lore_entry_create, lore_entry_update

SCENARIO_FILE = Path(__file__).resolve().parents[2] / "bench" / "data" / "knowledge" / "scenario.json"
DIGEST_META = "knowledge_scenario_sha256"


@dataclass
class DemoKnowledgeResult:
    game_save: Save | None
    changed: bool
    note: str

    def summary_line(self) -> str:
        return self.note


def scenario_read(path: Path = SCENARIO_FILE) -> tuple[dict, str]:
    """Return the scenario and its digest; raise DemoDataError when it is missing or malformed."""
    try:
        raw = path.read_bytes()
        data = json.loads(raw)
    except (OSError, ValueError) as exc:
        raise DemoDataError(f"the knowledge scenario {path} cannot be read: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != "axiom-knowledge-scenario":
        raise DemoDataError(f"{path} is not an axiom-knowledge-scenario file")
    for index, turn in enumerate(data.get("turns") or [], start=1):
        if turn.get("turn_id") != index:
            raise DemoDataError(f"{path}: turn {index} is numbered {turn.get('turn_id')!r}")
    return data, hashlib.sha256(raw).hexdigest()


def _scenario_state(turn: dict) -> dict:
    state = dict(turn["state"])
    if turn.get("reveals"):
        state["reveals"] = [r for r in turn["reveals"] if "entry" in r]
    return state


def scenario_secrets_load(*, universe, data: dict) -> None:
    """Write the scenario's secret entries into `universe`'s Lore Book (matched by entry id).

    Through the lore services, as an author's import would: each new or changed entry gets a
    revision (action import), its word counts and a pending embedding state (the sync job is
    queued on commit), and a link to a secret written later in the file is kept pending
    until that secret is created. A second load with the same file writes nothing.
    """
    by_id = {e.entry_id: e for e in LoreEntry.objects.filter(universe=universe)}
    for secret in data["secrets"]:
        values = {
            "title": secret["title"],
            "kind": LoreKind.CONCEPT,
            "text": secret["text"],
            "keys": list(secret["keys"]),
            "known_by": list(secret["known_by"]),
        }
        link_ids = list(secret.get("links", []))
        links = [by_id[i] for i in link_ids if i in by_id]
        pending = [i for i in link_ids if i not in by_id]
        entry = by_id.get(secret["entry_id"])
        if entry is None:
            by_id[secret["entry_id"]] = lore_entry_create(
                universe=universe,
                user=None,
                entry_id=secret["entry_id"],
                links=links,
                pending_links=pending,
                action=LoreRevision.Action.IMPORT,
                **values,
            )
        else:
            lore_entry_update(
                entry=entry, user=None, links=links, pending_links=pending, action=LoreRevision.Action.IMPORT, **values
            )


def scenario_append_turn(*, save: Save, turn: dict, index=None) -> list[int]:
    """Append one scenario turn as play would record it (no jobs); return its fact ids."""
    turn_id, state = turn["turn_id"], _scenario_state(turn)
    if turn_id != save.current_turn + 1:
        raise DemoDataError(f"scenario turn {turn_id} does not follow the save's turn {save.current_turn}")
    index = index or character_index(save.universe, save=save)
    # The append hooks every path runs (`turn_record`): the Event, state, presence, reveals, lore activation,
    # chapters (closed without a summary job: the demo calls no LLM).
    turn_record(
        save=save,
        turn_id=turn_id,
        player_input=turn["player_input"],
        narrative=turn["narrative"],
        state=state,
        index=index,
        summarize=False,
    )
    fact_ids = insert_facts(save, turn_id, [Fact(f["statement"], entities=list(f["entities"])) for f in turn["facts"]])
    Save.objects.filter(pk=save.pk).update(current_turn=turn_id)
    save.current_turn = turn_id
    return fact_ids


def scenario_save_create(*, universe, data: dict, digest: str = "") -> Save:
    """Create the scenario's save (living mode, no turns yet)."""
    meta = universe.meta_values()
    if digest:
        meta[DIGEST_META] = digest
    return Save.objects.create(
        universe=universe, save_id=data["save_id"], name=data["save_name"], memory_mode=MemoryMode.LIVING, meta=meta
    )


def demo_knowledge_load(*, universe, path: Path = SCENARIO_FILE) -> DemoKnowledgeResult:
    """Load the scenario's secrets into `universe` and (re)make its save; one transaction."""
    data, digest = scenario_read(path)
    with transaction.atomic():
        scenario_secrets_load(universe=universe, data=data)
        existing = Save.objects.filter(save_id=data["save_id"]).first()
        if existing is not None and existing.universe_id != universe.pk:
            raise DemoDataError(f"save {data['save_id']!r} already exists in another universe")
        if existing is not None and (existing.meta or {}).get(DIGEST_META) == digest:
            return DemoKnowledgeResult(existing, False, f"Knowledge demo save {existing.save_id!r}: up to date.")
        if existing is not None:
            existing.delete()
        save = scenario_save_create(universe=universe, data=data, digest=digest)
        index = character_index(universe, save=save)
        for turn in data["turns"]:
            scenario_append_turn(save=save, turn=turn, index=index)
    return DemoKnowledgeResult(
        save,
        True,
        f"Loaded the knowledge demo save {save.save_id!r}: {len(data['turns'])} turns, {len(data['secrets'])} secrets.",
    )
