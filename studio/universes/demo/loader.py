"""Load the demo universe and its playthrough into the database, idempotently.

`demo_read()` parses and checks the data files; `demo_load()` writes them in one
transaction (every row matched by a stable key: universe slug, meta key, lore `entry_id`,
`save_id`, turn id), so running it again changes nothing unless the files or the rows
changed; `demo_embed()` runs after the commit and puts the save's narrative and Lore Book
(and the universe's own Lore Book) into the vector store, skipping work already done.
"""

from __future__ import annotations

import importlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import models, transaction

from studio.memory.lore.embedding_state import lore_embedding_state_set
from studio.world.models import (
    EmbeddingState,
    Event,
    LoreEntry,
    LoreKind,
    MemoryMode,
    Save,
    StateCache,
    Universe,
    UniverseMeta,
)
from studio.universes.services.lore_rows import lore_counts_apply, lore_entry_snapshot, lore_revision
from studio.universes.models import LoreRevision

DEMO_DIR = Path(__file__).resolve().parent
UNIVERSE_FILE = DEMO_DIR / "universe.json"
SAVE_FILE = DEMO_DIR / "save.jsonl"

LORE_FIELDS = ("entry_id", "title", "kind", "text", "keys", "links")
TURN_FIELDS = ("turn_id", "player_input", "narrative", "state")


class DemoDataError(ValueError):
    """The demo files are malformed, or the database holds a conflicting row."""


@dataclass(frozen=True)
class DemoData:
    slug: str
    name: str
    description: str
    meta: dict[str, str]
    lore: list[dict[str, Any]]
    save_id: str
    save_name: str
    turns: list[dict[str, Any]]

    @property
    def last_turn(self) -> int:
        return self.turns[-1]["turn_id"] if self.turns else 0


def meta_value_as_text(value: Any) -> str:
    """Return the Universe_Meta text for a value from the file (objects become JSON)."""
    if isinstance(value, str):
        return value
    # Compact JSON with real characters: the form the studio's meta editor stores.
    return json.dumps(value, ensure_ascii=False)


def demo_read(*, universe_path: Path = UNIVERSE_FILE, save_path: Path = SAVE_FILE) -> DemoData:
    """Parse the demo files and check them; raise DemoDataError naming the first problem."""
    try:
        universe = json.loads(Path(universe_path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DemoDataError(f"{universe_path}: {exc}") from exc
    for key in ("slug", "name", "meta", "lore", "save"):
        if key not in universe:
            raise DemoDataError(f"{universe_path}: missing {key!r}")

    kinds = set(LoreKind.values)
    lore: list[dict[str, Any]] = []
    seen: set[str] = set()
    for position, item in enumerate(universe["lore"], start=1):
        missing = [name for name in LORE_FIELDS if name not in item]
        if missing:
            raise DemoDataError(f"lore entry {position}: missing {', '.join(missing)}")
        if item["entry_id"] in seen:
            raise DemoDataError(f"lore entry {item['entry_id']!r} appears twice")
        if item["kind"] not in kinds:
            raise DemoDataError(f"lore entry {item['entry_id']!r}: unknown kind {item['kind']!r}")
        if not isinstance(item["keys"], list) or not isinstance(item["links"], list):
            raise DemoDataError(f"lore entry {item['entry_id']!r}: keys and links must be lists")
        seen.add(item["entry_id"])
        lore.append(item)
    for item in lore:
        for target in item["links"]:
            if target not in seen:
                raise DemoDataError(f"lore entry {item['entry_id']!r} links to unknown {target!r}")

    turns: list[dict[str, Any]] = []
    try:
        lines = Path(save_path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise DemoDataError(f"{save_path}: {exc}") from exc
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            turn = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DemoDataError(f"{save_path} line {number}: {exc}") from exc
        missing = [name for name in TURN_FIELDS if name not in turn]
        if missing:
            raise DemoDataError(f"{save_path} line {number}: missing {', '.join(missing)}")
        expected = len(turns) + 1
        if turn["turn_id"] != expected:
            raise DemoDataError(f"{save_path} line {number}: turn_id {turn['turn_id']!r}, expected {expected}")
        if not isinstance(turn["state"], dict):
            raise DemoDataError(f"{save_path} line {number}: state must be a JSON object")
        turns.append(turn)

    return DemoData(
        slug=universe["slug"],
        name=universe["name"],
        description=universe.get("description", ""),
        meta={key: meta_value_as_text(value) for key, value in universe["meta"].items()},
        lore=lore,
        save_id=universe["save"]["save_id"],
        save_name=universe["save"]["name"],
        turns=turns,
    )


@dataclass
class DemoLoadResult:
    universe: Universe
    game_save: Save
    created: Counter = field(default_factory=Counter)
    updated: Counter = field(default_factory=Counter)
    unchanged: Counter = field(default_factory=Counter)
    removed: Counter = field(default_factory=Counter)

    def tally(self, kind: str, outcome: str, n: int = 1) -> None:
        getattr(self, outcome)[kind] += n

    @property
    def changed(self) -> bool:
        return bool(sum(self.created.values()) + sum(self.updated.values()) + sum(self.removed.values()))

    @property
    def embedded_text_changed(self) -> bool:
        """Whether lore or narrative the vector store holds may now be out of date."""
        kinds = ("lore entries", "lore links", "turns")
        return any(counter[kind] for counter in (self.created, self.updated, self.removed) for kind in kinds)

    def summary_lines(self) -> list[str]:
        lines = []
        for kind in ("universe", "meta", "lore entries", "lore links", "save", "turns", "states"):
            parts = [
                f"{counter[kind]} {label}"
                for label, counter in (
                    ("created", self.created),
                    ("updated", self.updated),
                    ("unchanged", self.unchanged),
                    ("removed", self.removed),
                )
                if counter[kind]
            ]
            lines.append(f"  {kind}: {', '.join(parts) if parts else 'none'}")
        if self.removed["turn records"]:
            lines.append(
                "  memory, lore activation and narrator records after the last demo turn: "
                f"{self.removed['turn records']} removed or rolled back"
            )
        return lines


def _assign(instance: models.Model, values: dict[str, Any]) -> list[str]:
    """Set `values` on `instance` and return the names of the fields that changed."""
    changed = []
    for name, value in values.items():
        if getattr(instance, name) != value:
            setattr(instance, name, value)
            changed.append(name)
    return changed


def _save_changed(instance: models.Model, changed: list[str]) -> None:
    fields = list(changed)
    if any(f.name == "updated_at" for f in instance._meta.concrete_fields):
        fields.append("updated_at")
    instance.save(update_fields=fields)


def _load_universe(data: DemoData, result: DemoLoadResult) -> Universe:
    universe = Universe.objects.filter(slug=data.slug).first()
    values = {"name": data.name, "description": data.description}
    if universe is None:
        result.tally("universe", "created")
        return Universe.objects.create(slug=data.slug, **values)
    changed = _assign(universe, values)
    if changed:
        _save_changed(universe, changed)
        result.tally("universe", "updated")
    else:
        result.tally("universe", "unchanged")
    return universe


def _load_meta(universe: Universe, data: DemoData, result: DemoLoadResult) -> dict[str, str]:
    """Write the file's meta keys (keys an author added are kept) and return all of them."""
    rows = {row.key: row for row in UniverseMeta.objects.filter(universe=universe)}
    for key, value in data.meta.items():
        row = rows.get(key)
        if row is None:
            rows[key] = UniverseMeta.objects.create(universe=universe, key=key, value=value)
            result.tally("meta", "created")
        elif row.value != value:
            row.value = value
            row.save(update_fields=["value"])
            result.tally("meta", "updated")
        else:
            result.tally("meta", "unchanged")
    return {key: rows[key].value for key in sorted(rows)}


def _load_lore(universe: Universe, data: DemoData, result: DemoLoadResult) -> None:
    existing = {
        entry.entry_id: entry for entry in LoreEntry.objects.filter(universe=universe).prefetch_related("links")
    }
    # What a revision keeps, as every Lore Book writer records it (lore_rows.py): known_by and
    # the activation fields included, though the demo files set neither.
    before = {entry_id: lore_entry_snapshot(entry) for entry_id, entry in existing.items()}
    entries: dict[str, LoreEntry] = {}
    created_ids: set[str] = set()
    for item in data.lore:
        values = {
            "title": item["title"],
            "kind": item["kind"],
            "text": item["text"],
            "keys": list(item["keys"]),
            "extensions": item.get("extensions", {}),
        }
        entry = existing.get(item["entry_id"])
        if entry is None:
            entry = LoreEntry(universe=universe, entry_id=item["entry_id"], **values)
            lore_counts_apply(entry)
            entry.save()
            created_ids.add(entry.entry_id)
            result.tally("lore entries", "created")
        else:
            changed = _assign(entry, values)
            if "text" in changed or entry.word_count is None:
                lore_counts_apply(entry)
                changed += ["word_count", "token_count"]
            if changed:
                if "text" in changed:
                    # The text the vector store holds is now out of date.
                    if lore_embedding_state_set(entry, state=EmbeddingState.PENDING):
                        changed += ["embedding_state", "embedding_error"]
                _save_changed(entry, changed)
                result.tally("lore entries", "updated")
            else:
                result.tally("lore entries", "unchanged")
        entries[entry.entry_id] = entry

    revisions = []
    for item in data.lore:
        entry = entries[item["entry_id"]]
        wanted = set(item["links"])
        current = set(before.get(entry.entry_id, {}).get("links", []))
        if wanted != current:
            entry.links.set([entries[target] for target in sorted(wanted)])
            result.tally("lore links", "updated" if current else "created", len(wanted ^ current))
        else:
            result.tally("lore links", "unchanged", len(wanted))
        after = lore_entry_snapshot(entry, links=sorted(wanted))
        if entry.entry_id in created_ids:
            old = None
        else:
            old = before[entry.entry_id]
            if old == after:
                continue
        revisions.append(
            lore_revision(
                universe=universe,
                entry=entry,
                entry_id=entry.entry_id,
                user=None,
                action=LoreRevision.Action.IMPORT,
                before=old,
                after=after,
            )
        )
    LoreRevision.objects.bulk_create(revisions)


# The timeline tables the demo loader reports under a name of its own.
TRIM_KINDS = {"events": "turns", "states": "states"}


def _trim_after(game_save: Save, last_turn: int, result: DemoLoadResult) -> None:
    """Rewind the save to the demo's last turn when it was played past it: the registry's
    rewind (`studio.memory.rewind.timeline_rewind`), as the Rewind page's. Turns and states
    after the last turn go, and so does everything else a turn owns (living memory, lore
    activation state, chapters, recorded queries, narrator snapshots and drafts); the save
    moves to a new timeline generation, so background jobs of the removed turns write nothing.
    """
    from studio.memory.rewind import timeline_rewind

    locked = Save.objects.select_for_update().get(pk=game_save.pk)
    for name, n in timeline_rewind(locked, last_turn).items():
        result.tally(TRIM_KINDS.get(name, "turn records"), "removed", n)
    game_save.current_turn, game_save.timeline_generation = locked.current_turn, locked.timeline_generation


def _append(game_save: Save, turn: dict) -> None:
    """Write a new demo turn as play would (every per-turn table's append hook, in registry order);
    the chapters it closes get no summary job (the demo's summaries are recorded)."""
    from studio.memory import timeline

    timeline.append_turn(
        timeline.TurnAppend(
            save=game_save,
            turn_id=turn["turn_id"],
            player_input=turn["player_input"],
            narrative=turn["narrative"],
            state=turn["state"],
            options={"summarize": False},
        )
    )


def _load_save(universe: Universe, data: DemoData, meta: dict[str, str], living: bool, result: DemoLoadResult) -> Save:
    game_save = Save.objects.filter(save_id=data.save_id).first()
    values = {
        "name": data.save_name,
        "memory_mode": MemoryMode.LIVING if living else MemoryMode.CLASSIC,
        # Universe_Meta is copied into a save at its creation; the demo save is re-made from
        # the files on every load, so it gets a fresh copy.
        "meta": dict(meta),
    }
    if game_save is None:
        result.tally("save", "created")
        game_save = Save.objects.create(universe=universe, save_id=data.save_id, **values)
    elif game_save.universe_id != universe.pk:
        raise DemoDataError(f"save {data.save_id!r} already exists in another universe ({game_save.universe})")

    played_past = any(
        model.objects.filter(game_save=game_save, turn_id__gt=data.last_turn).exists() for model in (Event, StateCache)
    )
    if played_past:
        _trim_after(game_save, data.last_turn, result)
    if result.created["save"] == 0:
        changed = _assign(game_save, values)
        if changed:
            _save_changed(game_save, changed)
            result.tally("save", "updated")
        else:
            result.tally("save", "unchanged")
    # The files' turns are 1..last_turn without a gap (`demo_read`): after the trim, every
    # stored turn is one of them; the missing ones are appended in turn order.
    events = {event.turn_id: event for event in Event.objects.filter(game_save=game_save)}
    states = {row.turn_id: row for row in StateCache.objects.filter(game_save=game_save)}

    appended = 0
    for turn in data.turns:
        turn_id = turn["turn_id"]
        event = events.get(turn_id)
        if event is None:
            StateCache.objects.filter(game_save=game_save, turn_id=turn_id).delete()  # a state without its turn
            _append(game_save, turn)
            appended += 1
            continue
        event_values = {"player_input": turn["player_input"], "narrative": turn["narrative"]}
        changed = _assign(event, event_values)
        if changed:
            _save_changed(event, changed)
            result.tally("turns", "updated")
        else:
            result.tally("turns", "unchanged")
        row = states.get(turn_id)
        if row is None:
            StateCache.objects.create(game_save=game_save, turn_id=turn_id, state=turn["state"])
            result.tally("states", "created")
        elif row.state != turn["state"]:
            row.state = turn["state"]
            row.save(update_fields=["state"])
            result.tally("states", "updated")
        else:
            result.tally("states", "unchanged")
    if game_save.current_turn != data.last_turn:
        Save.objects.filter(pk=game_save.pk).update(current_turn=data.last_turn)
        game_save.current_turn = data.last_turn
    result.tally("turns", "created", appended)
    result.tally("states", "created", appended)
    return game_save


def demo_load(*, living: bool = False, data: DemoData | None = None) -> DemoLoadResult:
    """Write the demo universe, its meta and Lore Book, and the demo save, in one transaction.

    Every row is matched by its stable key and only written when it differs from the files,
    so a second run changes nothing. The demo save is restored to the files: turns played
    after its last turn are removed (with the living memory built from them) and its meta is
    a copy of the universe's meta. `living` picks the save's memory mode.
    """
    data = data or demo_read()
    with transaction.atomic():
        result = DemoLoadResult(universe=None, game_save=None)  # type: ignore[arg-type]
        universe = _load_universe(data, result)
        meta = _load_meta(universe, data, result)
        _load_lore(universe, data, result)
        game_save = _load_save(universe, data, meta, living, result)
        result.universe = universe
        result.game_save = game_save
    return result


@dataclass
class DemoEmbedResult:
    ok: bool
    notes: list[str] = field(default_factory=list)
    narrative_chunks: int = 0
    lore_chunks: int = 0


def _vector_memory():
    """Return the studio's VectorMemory, or raise with the reason it is unavailable."""
    module = importlib.import_module("studio.memory.vector")
    return module.get_vector_memory()


def _lore_payload(universe: Universe) -> list[dict[str, Any]]:
    return [
        {
            "entry_id": entry.entry_id,
            "title": entry.title,
            "text": entry.text,
            "links": sorted(link.entry_id for link in entry.links.all()),
        }
        for entry in LoreEntry.objects.filter(universe=universe).prefetch_related("links").order_by("entry_id")
    ]


def _scope_is_complete(memory, scope: str, lore_ids: set[str], turn_ids: set[int]) -> bool:
    """Whether `scope` holds exactly one lore entry per id and the narrative of every turn.

    With `get_chunks` the check is by entry id and turn id (a long text may be stored as
    several chunks); a store without it is checked by its chunk count.
    """
    get_chunks = getattr(memory, "get_chunks", None)
    if get_chunks is None:
        return memory.count(scope) == len(lore_ids) + len(turn_ids)
    chunks = get_chunks(scope)
    lore = {chunk.get("entry_id") for chunk in chunks if chunk.get("chunk_type") == "lore"}
    narrative = {chunk.get("turn_id") for chunk in chunks if chunk.get("chunk_type") != "lore"}
    return lore == lore_ids and narrative == turn_ids


def _embed_narrative(memory, save_id: str, events: list[Event]) -> int:
    """Embed the turns' narrative (in batches when the store can); return how many stored."""
    embed_chunks = getattr(memory, "embed_chunks", None)
    if embed_chunks is not None:
        ids = embed_chunks(
            save_id,
            [{"turn_id": event.turn_id, "text": event.narrative, "chunk_type": "narrative"} for event in events],
        )
        return sum(bool(chunk_id) for chunk_id in ids)
    stored = 0
    for event in events:
        stored += bool(memory.embed_chunk(save_id, event.turn_id, event.narrative, chunk_type="narrative"))
    return stored


def demo_embed(*, game_save: Save, universe: Universe, memory=None, force: bool = False) -> DemoEmbedResult:
    """Embed the demo save's turns and lore, and the universe's own Lore Book.

    Run after the load has committed. A scope that already holds every lore entry and
    every turn is left alone unless `force` (the load changed lore or turns); otherwise its
    narrative chunks are dropped (`rollback(save_id, 0)`: lore is stored at turn 0 and is
    replaced by `sync_lore`) and everything is embedded again. When the vector module or
    the embedding runtime is unavailable, say so and return without raising: the rows in
    the database are complete either way.
    """
    result = DemoEmbedResult(ok=False)
    if memory is None:
        try:
            memory = _vector_memory()
        except Exception as exc:  # missing module, missing model, no Chroma: all reported the same way
            result.notes.append(f"Embedding skipped: the vector store is unavailable ({type(exc).__name__}: {exc}).")
            return result

    lore = _lore_payload(universe)
    lore_ids = {entry["entry_id"] for entry in lore}
    events = [
        event for event in Event.objects.filter(game_save=game_save).order_by("turn_id") if event.narrative.strip()
    ]
    turn_ids = {event.turn_id for event in events}
    save_id = game_save.save_id
    try:
        if not force and _scope_is_complete(memory, save_id, lore_ids, turn_ids):
            result.notes.append(f"Save {save_id}: already embedded, skipped.")
        else:
            memory.rollback(save_id, 0)
            result.lore_chunks += memory.sync_lore(save_id, lore)
            if lore and result.lore_chunks == 0:
                result.notes.append(
                    "Embedding skipped: the embedding runtime is unavailable (sync_lore embedded nothing)."
                )
                return result
            result.narrative_chunks = _embed_narrative(memory, save_id, events)
            result.notes.append(
                f"Save {save_id}: embedded {result.narrative_chunks} turns and {len(lore)} lore "
                f"entries ({memory.count(save_id)} chunks stored)."
            )

        scope = universe.lore_scope_id
        pending = LoreEntry.objects.filter(universe=universe).exclude(embedding_state=EmbeddingState.EMBEDDED)
        if not force and not pending.exists() and _scope_is_complete(memory, scope, lore_ids, set()):
            result.notes.append(f"Lore Book ({scope}): already embedded, skipped.")
        else:
            embedded = memory.sync_lore(scope, lore)
            result.lore_chunks += embedded
            if embedded:
                lore_embedding_state_set(LoreEntry.objects.filter(universe=universe), state=EmbeddingState.EMBEDDED)
            result.notes.append(f"Lore Book ({scope}): embedded {embedded} entries.")
    except Exception as exc:
        result.notes.append(f"Embedding stopped: {type(exc).__name__}: {exc}. The database rows are loaded.")
        return result
    result.ok = True
    return result
