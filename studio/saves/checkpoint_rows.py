"""Row-level helpers of the rewind preview: beliefs and mental models as they stood at turn N.

`belief_after` / `model_after` turn a belief's or a mental model's fields as a rewind to N
would leave them (the storage layer's rollback rules, `BELIEF_ROLLBACK.values_at` and
`MODEL_ROLLBACK.values_at`) into the rows a rewind preview shows. What a rewind and a fork
do to each per-turn table is in the timeline registry (`studio.memory.timeline`).
"""
from __future__ import annotations

from typing import Any

from studio.memory.mental_models import MentalModel
from studio.memory.models import MentalModel as MentalModelRow
from studio.memory.models import Observation as ObservationRow
from studio.memory.observations import Observation


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

