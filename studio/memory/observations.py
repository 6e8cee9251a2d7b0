"""Consolidated-belief storage for "living" memory mode (engine API `axiom.observations`).

Where `facts` stores the atomic facts extracted each turn, this module stores
observations: synthetic beliefs that evolve as facts accumulate. A belief carries

- `statement`: the canonical belief, one sentence;
- `subject`: the entity it is about / who holds it ("" = the world);
- `sources`: the supporting facts as [{"fact_id", "turn_id"}] (the rollback key);
- `proof_count`: always `len(sources)`;
- `history`: the trail of CREATE/UPDATE/DELETE changes, each entry stamped with its turn.

Deterministic storage and rollback only (no LLM). The LLM that decides the changes lives in
`studio.memory.consolidate`.

Rollback. Rewinding to turn N deletes every belief created after N. For a survivor that
changed after N, the seed keeps only its sources at turns <= N and flags it stale; here it
also gets back the statement and subject it had at N, rebuilt from its history trail
(whose later entries are dropped), and a belief DELETEd after N comes back (a DELETE keeps
the row as a tombstone, `deleted_turn_id`). So nothing learnt after N survives a rewind.
See docs/living-memory.md.

Memory that follows edits. Facts never change, but an edit of a turn's narrative re-extracts
it: the turn's old facts are deleted (`studio.memory.pipeline.living.forget_turn_outputs`).
A belief keeps only the sources that still exist (`beliefs_drop_missing_sources`), and one
whose every source is gone is retired: a DELETE entry in its trail, stamped with the turn the
save was at, with the `reason`. A rewind rebuilds sources from the trail, which still names
the deleted facts, so the rollback drops them again and retires, at the rewind's target, a
belief left with none (`BeliefRollback`): rewinding to N twice, or to N and then to M,
leaves what rewinding straight to M leaves. A belief that never had a source is left alone.

Identical beliefs are one belief. A CREATE whose statement is the same as a held belief's
about the same subject (case, spacing and a final full stop aside: `same_statement`) becomes
an UPDATE of that belief with the new sources; an UPDATE that makes a belief identical to
another folds it into the other (its sources added there, itself retired with the reason).
Both are trail entries at the consolidation's turn, so a rewind before it undoes them.

Names. The engine contract calls a belief an observation: its names stay (`Observation`,
`observation_id`, `get_observations`, `count_observations`, `insert_observation`,
`rollback_observations[_standalone]`, `obs`); everything else here says belief
(`restore_belief_as_of`, `beliefs_to_roll_back`, `rollback_beliefs_for_pk`). A `save_id`
is the save's public id, a `save_pk` its row's integer key (docs/architecture.md, "Glossary").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Q

from studio.memory.models import Fact as FactRow
from studio.memory.models import Observation as ObservationRow
from studio.memory.models import subject_key_for
from studio.memory.belief_upkeep import (
    CREATE,
    DELETE,
    SOURCES_GONE,
    UPDATE,
    belief_absorb,
    belief_retire,
    beliefs_drop_missing_sources,
    clean_sources,
    held_twin,
    same_statement,
    trail_entry,
)
from studio.memory.turn_rows import RowRollback, bounded_read, save_pk_for

__all__ = [
    "TREND_NEW",
    "TREND_STRENGTHENING",
    "TREND_WEAKENING",
    "TREND_STALE",
    "TREND_STABLE",
    "TRENDS",
    "compute_trend",
    "Observation",
    "insert_observation",
    "get_observations",
    "count_observations",
    "rollback_observations",
    "apply_consolidation",
    "rollback_observations_standalone",
    "restore_belief_as_of",
    "beliefs_to_roll_back",
    "beliefs_drop_missing_sources",
    "belief_retire",
    "SOURCES_GONE",
    "same_statement",
    "trail_is_exact",
]

TREND_NEW = "new"
TREND_STRENGTHENING = "strengthening"
TREND_WEAKENING = "weakening"
TREND_STALE = "stale"
TREND_STABLE = "stable"
TRENDS = (TREND_NEW, TREND_STRENGTHENING, TREND_WEAKENING, TREND_STALE, TREND_STABLE)

STRENGTHENING_RATIO = 1.5
WEAKENING_RATIO = 0.5


def compute_trend(source_turns, now_turn: int | None, *, recent_turns: int = 15, old_turns: int = 45) -> str:
    """Classify a belief's trend from the turn ids of its supporting sources.

    Turn-based adaptation of Hindsight's evidence trend. A source is recent when it lies in
    the last `recent_turns` turns up to `now_turn` (now - recent_turns < t <= now); every
    other source is older evidence, spread over the `old_turns - recent_turns` turns of the
    old window (the window reaches `old_turns` back). Densities are per turn:

    - STALE: no source in the recent window (the belief may be outdated);
    - NEW: every source falls in the recent window;
    - STRENGTHENING: recent density / older density > 1.5;
    - WEAKENING: that ratio < 0.5;
    - STABLE: anything else, or unknown (no sources, or no current turn).

    Sources after `now_turn` (beyond the rewind horizon) are ignored. Deterministic and
    side-effect free.
    """
    if now_turn is None:
        return TREND_STABLE
    turns = []
    for t in source_turns or []:
        try:
            turn = int(t)
        except (TypeError, ValueError):
            continue
        if turn <= now_turn:
            turns.append(turn)
    if not turns:
        return TREND_STABLE
    recent_start = now_turn - recent_turns
    recent = sum(1 for t in turns if t > recent_start)
    older = len(turns) - recent
    if recent == 0:
        return TREND_STALE
    if older == 0:
        return TREND_NEW
    older_period = old_turns - recent_turns
    if recent_turns <= 0 or older_period <= 0:
        return TREND_STABLE
    ratio = (recent / recent_turns) / (older / older_period)
    if ratio > STRENGTHENING_RATIO:
        return TREND_STRENGTHENING
    if ratio < WEAKENING_RATIO:
        return TREND_WEAKENING
    return TREND_STABLE


@dataclass
class Observation:
    """One consolidated belief.

    `sources` is a list of {"fact_id": int, "turn_id": int}: the facts backing the belief
    and the turns they came from (the rollback key).
    """

    statement: str
    subject: str = ""
    proof_count: int = 1
    sources: list[dict] = field(default_factory=list)
    history: list[dict] = field(default_factory=list)
    created_turn_id: int = 0
    updated_turn_id: int = 0
    stale: bool = False
    observation_id: int | None = None

    def trend(self, now_turn: int | None) -> str:
        """Return this belief's trend at `now_turn` (see `compute_trend`)."""
        return compute_trend([s.get("turn_id") for s in self.sources or []], now_turn)

    @classmethod
    def from_row(cls, row: ObservationRow) -> "Observation":
        return cls(
            statement=row.statement,
            subject=row.subject,
            proof_count=row.proof_count,
            sources=[dict(s) for s in row.sources or []],
            history=[dict(h) for h in row.history or []],
            created_turn_id=row.created_turn_id,
            updated_turn_id=row.updated_turn_id,
            stale=row.stale,
            observation_id=row.pk,
        )


# -- helpers -------------------------------------------------------------------------------


def _last_source_turn(sources: list[dict]) -> int:
    return max((int(s.get("turn_id") or 0) for s in sources), default=0)


def _attr(action: Any, name: str, default=None):
    if isinstance(action, dict):
        return action.get(name, default)
    return getattr(action, name, default)


# -- reads ---------------------------------------------------------------------------------


def get_observations(
    save_id: str,
    *,
    max_turn_id: int | None = None,
    subject: str | None = None,
    limit: int | None = None,
) -> list[Observation]:
    """Fetch a save's beliefs, most recently updated first.

    `max_turn_id` keeps beliefs created at turns <= it (the rewind horizon); `subject` keeps
    beliefs whose subject matches case-insensitively ("" keeps the world-level beliefs);
    `limit` caps the rows. None means no bound / no filter. Retired (DELETEd) beliefs are
    never returned.
    """
    return bounded_read(
        ObservationRow.objects.filter(game_save_id=save_pk_for(save_id)),
        turn_field="created_turn_id",
        max_turn_id=max_turn_id,
        subject=subject,
        order_by=("-updated_turn_id", "-id"),
        limit=limit,
        convert=Observation.from_row,
    )


def count_observations(save_id: str) -> int:
    """Return the number of beliefs a save holds (a cheap COUNT; retired ones excluded)."""
    return ObservationRow.objects.filter(game_save_id=save_pk_for(save_id)).count()


# -- writes --------------------------------------------------------------------------------


def insert_observation(save_id: str, obs: Observation) -> int | None:
    """Persist a single new belief and return its observation_id (None when skipped).

    Blank statements are skipped. `proof_count` is derived from `sources` so it can never
    disagree with them. When `obs.history` is empty a CREATE entry is recorded at
    `created_turn_id`, so a later rewind can restore the belief as it was. The new id is
    also set on `obs` in place.
    """
    statement = (obs.statement or "").strip()
    if not statement:
        return None
    sources = clean_sources(obs.sources)
    subject = (obs.subject or "").strip()
    history = [dict(h) for h in obs.history or []]
    if not history:
        history = [trail_entry(CREATE, obs.created_turn_id, statement, subject, sources)]
    row = ObservationRow(
        game_save_id=save_pk_for(save_id),
        statement=statement,
        subject=subject,
        sources=sources,
        history=history,
        created_turn_id=int(obs.created_turn_id or 0),
        updated_turn_id=max(int(obs.updated_turn_id or 0), int(obs.created_turn_id or 0)),
        stale=bool(obs.stale),
    )
    row.save()  # fills subject_key, proof_count and last_source_turn
    obs.observation_id = row.pk
    obs.proof_count = row.proof_count
    obs.sources = sources
    obs.history = history
    return row.pk


def _resolve_fact_turns(save_pk: int, fact_ids: list[int], fact_turn_map: dict[int, int]) -> dict[int, int]:
    """Map cited fact ids to turns: `fact_turn_map` first, then this save's Fact rows.

    Ids that are neither (a hallucinated citation, a fact of another save) are dropped.
    """
    known = {}
    for key, value in (fact_turn_map or {}).items():
        try:
            known[int(key)] = int(value)
        except (TypeError, ValueError):
            continue
    missing = [i for i in fact_ids if i not in known]
    if missing:
        known.update(FactRow.objects.filter(game_save_id=save_pk, pk__in=missing).values_list("pk", "turn_id"))
    return known


def _fact_ids(action) -> list[int]:
    ids = []
    for raw in _attr(action, "source_fact_ids", None) or []:
        try:
            ids.append(int(raw))
        except (TypeError, ValueError):
            continue
    return ids


def apply_consolidation(save_id: str, turn_id: int, actions: list, fact_turn_map: dict[int, int]) -> dict[str, int]:
    """Apply consolidator actions (CREATE / UPDATE / DELETE) to the beliefs store.

    Deterministic: it executes decisions the LLM already made. Each action has `kind`,
    `statement`, `subject`, `observation_id` and `source_fact_ids` (an object such as
    `ConsolidationAction`, or a dict). `fact_turn_map` maps cited fact ids to their turns so
    new sources carry the turn (the rollback key); ids missing from it are looked up among
    the save's facts, and dropped if unknown. Unknown belief ids and empty statements are
    skipped. `turn_id` is stamped as `updated_turn_id` (and `created_turn_id` for new
    beliefs). `proof_count` is always `len(sources)`, and every change is appended to the
    belief's `history` with its turn. A CREATE or UPDATE that would make two held beliefs
    about one subject say the same thing merges them instead (module docstring).

    Return {"created", "updated", "deleted", "skipped", "merged"} counts. Runs in one transaction.
    """
    counts = {"created": 0, "updated": 0, "deleted": 0, "skipped": 0, "merged": 0}
    actions = list(actions or [])
    if not actions:
        return counts
    save_pk = save_pk_for(save_id)
    turn = int(turn_id)
    all_ids = [i for a in actions for i in _fact_ids(a)]
    fact_turns = _resolve_fact_turns(save_pk, all_ids, fact_turn_map)

    def sources_for(action) -> list[dict]:
        return clean_sources({"fact_id": i, "turn_id": fact_turns[i]} for i in _fact_ids(action) if i in fact_turns)

    with transaction.atomic():
        for action in actions:
            kind = str(_attr(action, "kind", "") or "").strip().upper()
            statement = str(_attr(action, "statement", "") or "").strip()
            subject = str(_attr(action, "subject", "") or "").strip()
            if kind == CREATE:
                if not statement:
                    counts["skipped"] += 1
                    continue
                sources = sources_for(action)
                twin = held_twin(save_pk, subject, statement)
                if twin is not None:  # the same belief again: one belief, more proof
                    belief_absorb(twin, turn, twin.statement, sources)
                    twin.save()
                    counts["merged"] += 1
                    continue
                ObservationRow(
                    game_save_id=save_pk,
                    statement=statement,
                    subject=subject,
                    sources=sources,
                    history=[trail_entry(CREATE, turn, statement, subject, sources)],
                    created_turn_id=turn,
                    updated_turn_id=turn,
                ).save()
                counts["created"] += 1
                continue
            if kind not in (UPDATE, DELETE):
                counts["skipped"] += 1
                continue
            try:
                observation_id = int(_attr(action, "observation_id", None))
            except (TypeError, ValueError):
                counts["skipped"] += 1
                continue
            row = ObservationRow.objects.select_for_update().filter(game_save_id=save_pk, pk=observation_id).first()
            if row is None:
                counts["skipped"] += 1
                continue
            if kind == DELETE:
                row.history = list(row.history or []) + [trail_entry(DELETE, turn, row.statement, row.subject, [])]
                row.deleted_turn_id = turn
                row.updated_turn_id = max(row.updated_turn_id, turn)
                row.save()
                counts["deleted"] += 1
                continue
            if not statement:
                counts["skipped"] += 1
                continue
            existing = clean_sources(row.sources)
            known = {s["fact_id"] for s in existing}
            added = [s for s in sources_for(action) if s["fact_id"] not in known]
            twin = held_twin(save_pk, subject or row.subject, statement, exclude_pk=row.pk)
            if twin is not None:  # the update makes it another held belief: fold it into that one
                belief_absorb(twin, turn, twin.statement, existing + added)
                twin.save()
                belief_retire(row, turn, f"merged into the identical belief #{twin.pk}")
                row.save()
                counts["merged"] += 1
                continue
            row.statement = statement
            if subject:
                row.subject = subject
            row.sources = existing + added
            row.history = list(row.history or []) + [trail_entry(UPDATE, turn, statement, row.subject, added)]
            row.updated_turn_id = max(row.updated_turn_id, turn)
            row.stale = False
            row.save()
            counts["updated"] += 1
    return counts


# -- rollback ------------------------------------------------------------------------------


def trail_is_exact(history: list[dict]) -> bool:
    """True when the trail records every change's statement and sources (what this module writes)."""
    content = [h for h in history or [] if h.get("action") in (CREATE, UPDATE) and h.get("statement")]
    return bool(content) and all("sources_added" in h for h in content)


def restore_belief_as_of(
    *,
    statement: str,
    subject: str,
    sources: list[dict],
    history: list[dict],
    updated_turn_id: int,
    deleted_turn_id: int | None,
    target_turn_id: int,
    holder: str = "",
) -> dict[str, Any]:
    """Return the field values a surviving belief had at `target_turn_id`.

    Sources keep those at turns <= target (the seed's rule). When the history trail
    records every change with its turn (everything this module writes), the statement,
    subject and sources are rebuilt exactly as they stood at the target, and the trail
    loses its later entries. A trail written elsewhere without that detail falls back to
    the seed's rule (statement kept). `updated_turn_id` is clamped to the target, the
    belief is flagged stale, and a DELETE after the target is undone. The studio's `holder`
    (who holds the belief, judged at each write: `knowledge/beliefs.py`) is the one the
    last entry up to the target records; with none recorded by then, the first one recorded
    later (the holder had not changed before it); with none at all, the current one.
    """
    n = target_turn_id
    kept_history = [dict(h) for h in history or [] if int(h.get("turn_id") or 0) <= n]
    filtered_sources = [s for s in clean_sources(sources) if s["turn_id"] <= n]
    content = [h for h in kept_history if h.get("action") in (CREATE, UPDATE) and h.get("statement")]
    if trail_is_exact(kept_history):
        last = content[-1]
        statement = last["statement"]
        subject = last.get("subject", subject) or ""
        rebuilt: list[dict] = []
        for h in content:
            rebuilt.extend(h.get("sources_added") or [])
        new_sources = [s for s in clean_sources(rebuilt) if s["turn_id"] <= n]
    else:
        new_sources = filtered_sources
    return {
        "statement": statement,
        "subject": subject,
        "subject_key": subject_key_for(subject),
        "sources": new_sources,
        "proof_count": len(new_sources),
        "last_source_turn": _last_source_turn(new_sources),
        "history": kept_history,
        "updated_turn_id": min(int(updated_turn_id), n),
        "deleted_turn_id": deleted_turn_id if deleted_turn_id is not None and deleted_turn_id <= n else None,
        "stale": True,
        "holder": _holder_as_of(history, kept_history, holder),
    }


def _holder_as_of(history: list[dict], kept_history: list[dict], holder: str) -> str:
    """The holder the kept trail records (see `restore_belief_as_of`)."""
    for trail in (reversed(kept_history), history or []):
        for entry in trail:
            if "holder" in entry:
                return str(entry["holder"] or "")
    return holder


ROLLBACK_FIELDS = [
    "statement",
    "subject",
    "subject_key",
    "sources",
    "proof_count",
    "last_source_turn",
    "history",
    "updated_turn_id",
    "deleted_turn_id",
    "stale",
    "holder",
]


# Beliefs created after N go; a survivor that changed after N (found through the indexed
# `updated_turn_id` / `last_source_turn` columns, never by scanning every belief) is rebuilt
# from its history trail. Retired beliefs count too (`all_objects`): a DELETE after N is undone.
@dataclass(frozen=True)
class BeliefRollback(RowRollback):
    """The belief rollback: `RowRollback`, then the sources an edit deleted dropped again.

    The trail the survivors are rebuilt from still names facts an edit deleted since; those
    sources are dropped and a belief left with none is retired at the target turn
    (`beliefs_drop_missing_sources`), so a rewind never brings back a belief with nothing under it.
    Only beliefs rebuilt from an exact trail (`trail_is_exact`) are looked at: a trail
    written elsewhere is restored by the seed's rule from the current sources, which an edit
    has already cleaned.
    """

    def roll_back(self, save_pk: int, target_turn_id: int) -> dict[str, int]:
        n = int(target_turn_id)
        changed_ids = list(self.split(save_pk, n)[1].values_list("id", flat=True))
        done = super().roll_back(save_pk, n)
        if changed_ids:  # held ones only: a retirement after N was undone and is judged again here
            rows = ObservationRow.objects.select_for_update().filter(pk__in=changed_ids)
            beliefs_drop_missing_sources(save_pk, n, rows=[r for r in rows if trail_is_exact(r.history)])
        return done  # the seed's {"deleted", "updated"}: a retired survivor counts as updated


BELIEF_ROLLBACK = BeliefRollback(
    model=ObservationRow,
    manager="all_objects",
    created_field="created_turn_id",
    changed=lambda n: Q(updated_turn_id__gt=n) | Q(last_source_turn__gt=n),
    restore=restore_belief_as_of,
    restore_from=("statement", "subject", "sources", "history", "updated_turn_id", "deleted_turn_id", "holder"),
    write_fields=tuple(ROLLBACK_FIELDS),
)


def beliefs_to_roll_back(save_pk: int, target_turn_id: int):
    """Return (rows created after the target, survivors changed after it) as querysets.

    Both include retired beliefs; the second finds its rows through the indexed
    `updated_turn_id` / `last_source_turn` columns, never by scanning every belief.
    """
    return BELIEF_ROLLBACK.split(save_pk, target_turn_id)


def rollback_beliefs_for_pk(save_pk: int, target_turn_id: int) -> dict[str, int]:
    """`rollback_observations` for the save whose integer key is `save_pk`, in the caller's transaction."""
    return BELIEF_ROLLBACK.roll_back(save_pk, target_turn_id)


def rollback_observations(save_id: str, target_turn_id: int) -> dict[str, int]:
    """Roll a save's beliefs back to their state at `target_turn_id`.

    Runs in the caller's transaction (the `conn` of the engine API), so
    `CheckpointManager.rewind` rolls beliefs back atomically with events and facts. Beliefs
    created after the target are deleted; a survivor that changed after it gets back its
    statement, subject and sources as of the target (sources at turns <= target, proof_count
    recomputed), its later history entries are dropped, `updated_turn_id` is clamped and it
    is flagged stale for the next consolidation pass.

    Return {"deleted": n, "updated": m}.
    """
    return BELIEF_ROLLBACK.roll_back_save(save_id, target_turn_id)


def rollback_observations_standalone(save_id: str, target_turn_id: int) -> dict[str, int]:
    """Standalone variant of `rollback_observations` with its own transaction."""
    return BELIEF_ROLLBACK.roll_back_save(save_id, target_turn_id)
