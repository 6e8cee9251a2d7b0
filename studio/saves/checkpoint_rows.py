"""Row-level helpers of the rewind preview: beliefs and mental models as they stood at turn N.

`belief_values_at` / `model_values_at` give a belief's or a mental model's fields as a
rewind to N would leave them (the storage layer's rollback rules, `BELIEF_ROLLBACK` and
`MODEL_ROLLBACK`); `belief_after` / `model_after` wrap them for a rewind preview. What a
rewind and a fork do to each per-turn table is in the timeline registry
(`studio.memory.timeline`).
"""
from __future__ import annotations

from typing import Any

from studio.memory.mental_models import MODEL_ROLLBACK, MentalModel
from studio.memory.models import MentalModel as MentalModelRow
from studio.memory.models import Observation as ObservationRow
from studio.memory.observations import BELIEF_ROLLBACK, Observation


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
    return BELIEF_ROLLBACK.values_at(row, n)


def model_values_at(row: MentalModelRow, n: int) -> dict[str, Any]:
    """Return the fields of mental model `row` as they stood at turn `n`."""
    return MODEL_ROLLBACK.values_at(row, n)
