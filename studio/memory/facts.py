"""Structured-fact storage for "living" memory mode (engine API `axiom.facts`).

In living mode each turn's narrative is distilled into atomic facts (who/what/when/where/why),
stored here tagged with the turn that produced them. The turn tag makes rollback trivial:
rewinding to turn N drops every fact from a later turn, in the same transaction as the
Event_Log (see `studio.saves.checkpoints.CheckpointManager.rewind`).

Deterministic storage only: no LLM, no network. The store is the Django database, so the
functions take no `db_path`; a save is addressed by its public `save_id` (a `Save` instance
is accepted too).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db.models import Q

from studio.memory.models import ENTITY_SEPARATOR, entity_index_for
from studio.memory.models import Fact as FactRow
from studio.memory.turn_rows import RowRollback, bounded_read, consecutive_runs, save_pk_for

__all__ = ["Fact", "insert_facts", "get_facts", "get_facts_in_turns", "count_facts", "rollback_facts"]


@dataclass
class Fact:
    """One atomic fact extracted from the narrative.

    `statement` is the canonical one-sentence form used for recall and embedding; the
    who/what/when/where/why fields are its structured decomposition.
    """

    statement: str
    fact_type: str = "world"
    who: str = ""
    what: str = ""
    when: str = ""
    where: str = ""
    why: str = ""
    entities: list[str] = field(default_factory=list)
    turn_id: int | None = None
    fact_id: int | None = None

    @classmethod
    def from_row(cls, row: FactRow) -> "Fact":
        return cls(
            statement=row.statement,
            fact_type=row.fact_type,
            who=row.who,
            what=row.what,
            when=row.when,
            where=row.where,
            why=row.why,
            entities=list(row.entities or []),
            turn_id=row.turn_id,
            fact_id=row.pk,
        )


def _text(value) -> str:
    return "" if value is None else str(value)


def insert_facts(save_id: str, turn_id: int, facts: list[Fact]) -> list[int]:
    """Persist a turn's extracted facts and return the new fact_id values.

    Blank statements are skipped (an extractor that found nothing writes no rows). Each Fact
    actually inserted gets its `fact_id` and `turn_id` set in place; skipped ones keep
    `fact_id=None`. Idempotency is the caller's concern: re-extracting a turn should first
    `rollback_facts` to the turn before it.
    """
    kept = [f for f in facts or [] if _text(f.statement).strip()]
    if not kept:
        return []
    save_pk = save_pk_for(save_id)
    turn = int(turn_id)
    rows = []
    for f in kept:
        entities = [str(e) for e in (f.entities or []) if str(e).strip()]
        rows.append(
            FactRow(
                game_save_id=save_pk,
                turn_id=turn,
                statement=_text(f.statement).strip(),
                fact_type=_text(f.fact_type).strip() or "world",
                who=_text(f.who),
                what=_text(f.what),
                when=_text(f.when),
                where=_text(f.where),
                why=_text(f.why),
                entities=entities,
                # bulk_create bypasses Fact.save(), which normally fills this column.
                entity_index=entity_index_for(entities),
            )
        )
    created = FactRow.objects.bulk_create(rows)
    ids = []
    for f, row in zip(kept, created):
        if row.pk is None:  # a backend that cannot return ids from a bulk insert
            raise RuntimeError("the database did not return ids for inserted facts")
        f.fact_id = row.pk
        f.turn_id = turn
        ids.append(row.pk)
    return ids


def get_facts(
    save_id: str,
    *,
    max_turn_id: int | None = None,
    entity: str | Sequence[str] | None = None,
    limit: int | None = None,
) -> list[Fact]:
    """Fetch a save's facts, most recent first (turn, then insertion order).

    `max_turn_id` keeps facts from turns <= it (the history window / rewind horizon);
    `entity` keeps facts whose entities list contains that name (case-insensitive exact
    match), or, given several names (a list or tuple: one character's title and aliases), any
    of them; `limit` caps the rows. None means no bound / no filter.
    """
    qs = _facts_naming(save_id, entity)
    if qs is None:
        return []
    return bounded_read(
        qs,
        turn_field="turn_id",
        max_turn_id=max_turn_id,
        order_by=("-turn_id", "-id"),
        limit=limit,
        convert=Fact.from_row,
    )


def get_facts_in_turns(
    save_id: str,
    turns,
    *,
    max_turn_id: int | None = None,
    entity: str | Sequence[str] | None = None,
    limit: int | None = None,
) -> list[Fact]:
    """Fetch a save's facts from the turns `turns` (any iterable of turn ids), most recent first.

    The other parameters are `get_facts`'s. The turns are queried as runs of consecutive
    ids (`turn_id BETWEEN a AND b` each), so a named time of hundreds of turns is a few
    ranges, not a list of hundreds of parameters.
    """
    ranges = Q()
    for first, last in consecutive_runs(sorted({int(t) for t in turns})):
        ranges |= Q(turn_id__range=(first, last))
    qs = _facts_naming(save_id, entity)
    if qs is None or not ranges:
        return []
    return bounded_read(
        qs.filter(ranges),
        turn_field="turn_id",
        max_turn_id=max_turn_id,
        order_by=("-turn_id", "-id"),
        limit=limit,
        convert=Fact.from_row,
    )


def _facts_naming(save_id: str, entity):
    """The save's fact rows, those naming `entity` (a name, or any of several) when given; None when no name is
    left (no fact names a blank)."""
    qs = FactRow.objects.filter(game_save_id=save_pk_for(save_id))
    if entity is None:
        return qs
    names = [entity] if isinstance(entity, str) else list(entity)
    needles = list(dict.fromkeys(str(name).strip().casefold() for name in names if str(name).strip()))
    if not needles:
        return None
    naming = Q()
    for needle in needles:  # one query, whatever the number of names
        naming |= Q(entity_index__contains=f"{ENTITY_SEPARATOR}{needle}{ENTITY_SEPARATOR}")
    return qs.filter(naming)


def count_facts(save_id: str) -> int:
    """Return the number of stored facts for a save (a cheap COUNT)."""
    return FactRow.objects.filter(game_save_id=save_pk_for(save_id)).count()


# Facts never change once written: a rollback only deletes the later ones.
FACT_ROLLBACK = RowRollback(model=FactRow, created_field="turn_id")


def rollback_facts_for_pk(save_pk: int, target_turn_id: int) -> int:
    """Delete facts after `target_turn_id` in the caller's transaction; return the count."""
    return FACT_ROLLBACK.roll_back(save_pk, target_turn_id)["deleted"]


def rollback_facts(save_id: str, target_turn_id: int) -> int:
    """Delete a save's facts from turns after `target_turn_id` and return the count.

    Standalone helper with its own transaction. The in-session rewind deletes facts inside
    `CheckpointManager.rewind`'s transaction instead, so events and facts roll back together.
    """
    return FACT_ROLLBACK.roll_back_save(save_id, target_turn_id)["deleted"]
