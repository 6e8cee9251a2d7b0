"""Row-level helpers of checkpoints: rows as they stood at turn N, and the fork's copies.

`belief_values_at` / `model_values_at` give a belief's or a mental model's fields as a
rewind to N would leave them (the storage layer's restore rules); `belief_after` /
`model_after` wrap them for a rewind preview. The `copy_*` functions copy a save's rows up
to turn N into a fork in set-based statements (one INSERT ... SELECT per turn table, bulk
creates for facts, beliefs and models with their ids remapped). All run inside the
caller's transaction.
"""
from __future__ import annotations

from typing import Any

from django.db import connection

from studio.memory.mental_models import MentalModel, restore_model_as_of
from studio.memory.models import Fact as FactRow
from studio.memory.models import MentalModel as MentalModelRow
from studio.memory.models import Observation as ObservationRow
from studio.memory.observations import Observation, restore_belief_as_of


def belief_after(row: ObservationRow, values: dict[str, Any]) -> Observation:
    """Return the belief `row` with the fields `values` (as a rewind would leave it)."""
    return Observation(
        statement=values["statement"],
        subject=values["subject"],
        proof_count=values["proof_count"],
        sources=values["sources"],
        history=values["history"],
        created_turn_id=row.created_turn_id,
        updated_turn_id=values["updated_turn_id"],
        stale=values["stale"],
        observation_id=row.pk,
    )


def model_after(row: MentalModelRow, values: dict[str, Any]) -> MentalModel:
    """Return the mental model `row` with the fields `values` (as a rewind would leave it)."""
    return MentalModel(
        subject=row.subject,
        summary=values["summary"],
        sources=values["sources"],
        created_turn_id=row.created_turn_id,
        updated_turn_id=values["updated_turn_id"],
        stale=values["stale"],
        model_id=row.pk,
    )


def belief_values_at(row: ObservationRow, n: int) -> dict[str, Any]:
    """Return the fields of belief `row` as they stood at turn `n`."""
    return restore_belief_as_of(
        statement=row.statement,
        subject=row.subject,
        sources=row.sources,
        history=row.history,
        updated_turn_id=row.updated_turn_id,
        deleted_turn_id=row.deleted_turn_id,
        target_turn_id=n,
    )


def model_values_at(row: MentalModelRow, n: int) -> dict[str, Any]:
    """Return the fields of mental model `row` as they stood at turn `n`."""
    return restore_model_as_of(
        summary=row.summary,
        sources=row.sources,
        versions=row.versions,
        updated_turn_id=row.updated_turn_id,
        target_turn_id=n,
    )


# The NarratorSnapshot columns a fork copies (every one but the id and the save).
SNAPSHOT_COLUMNS = [
    "turn_id", "player_input", "proposed", "edited", "alternatives", "model", "finish_reason", "latency_ms",
    "prompt_tokens", "completion_tokens", "prompt_chars", "system_prompt", "user_prompt", "context", "created_at",
]


def copy_turn_rows(model, columns: list[str], source_pk: int, fork_pk: int, n: int) -> None:
    """INSERT ... SELECT the rows of `model` up to turn `n` into the fork (one statement)."""
    meta = model._meta
    table = connection.ops.quote_name(meta.db_table)
    cols = [connection.ops.quote_name(meta.get_field(c).column) for c in columns]
    save_col = connection.ops.quote_name(meta.get_field("game_save").column)
    turn_col = connection.ops.quote_name(meta.get_field("turn_id").column)
    sql = (
        f"INSERT INTO {table} ({save_col}, {', '.join(cols)}) "
        f"SELECT %s, {', '.join(cols)} FROM {table} WHERE {save_col} = %s AND {turn_col} <= %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [fork_pk, source_pk, n])


def copy_facts(source_pk: int, fork_pk: int, n: int) -> dict[int, int]:
    """Copy the facts up to turn `n` into the fork; return {source fact id: fork fact id}."""
    rows = list(FactRow.objects.filter(game_save_id=source_pk, turn_id__lte=n).order_by("id"))
    old_ids = [r.pk for r in rows]
    for r in rows:
        r.pk = None
        r.id = None
        r.game_save_id = fork_pk
    created = FactRow.objects.bulk_create(rows, batch_size=2000)
    return {old: new.pk for old, new in zip(old_ids, created)}


def copy_beliefs(source_pk: int, fork_pk: int, n: int, fact_ids: dict[int, int]) -> dict[int, int]:
    """Copy the beliefs as they stood at turn `n` (sources remapped); return their id map."""
    def remap(sources):
        return [
            {**s, "fact_id": fact_ids[int(s["fact_id"])]}
            for s in sources or []
            if int(s.get("fact_id", -1)) in fact_ids
        ]

    rows = list(
        ObservationRow.all_objects.filter(game_save_id=source_pk, created_turn_id__lte=n).order_by("id")
    )
    old_ids = [r.pk for r in rows]
    for r in rows:
        if r.updated_turn_id > n or r.last_source_turn > n:
            for name, value in belief_values_at(r, n).items():
                setattr(r, name, value)
        r.sources = remap(r.sources)
        r.history = [
            {**h, "sources_added": remap(h["sources_added"])} if "sources_added" in h else dict(h)
            for h in r.history or []
        ]
        r.proof_count = len(r.sources)
        r.pk = None
        r.id = None
        r.game_save_id = fork_pk
    created = ObservationRow.all_objects.bulk_create(rows, batch_size=1000)
    return {old: new.pk for old, new in zip(old_ids, created)}


def copy_models(source_pk: int, fork_pk: int, n: int, belief_ids: dict[int, int]) -> None:
    """Copy the mental models as they stood at turn `n` (belief sources remapped)."""
    def remap(ids):
        return [belief_ids[int(i)] for i in ids or [] if int(i) in belief_ids]

    rows = list(MentalModelRow.objects.filter(game_save_id=source_pk, created_turn_id__lte=n).order_by("id"))
    for r in rows:
        if r.updated_turn_id > n:
            for name, value in model_values_at(r, n).items():
                setattr(r, name, value)
        r.sources = remap(r.sources)
        r.versions = [{**v, "sources": remap(v.get("sources"))} for v in r.versions or []]
        r.pk = None
        r.id = None
        r.game_save_id = fork_pk
    MentalModelRow.objects.bulk_create(rows)
