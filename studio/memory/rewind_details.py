"""What a rewind preview lists of beliefs and mental models: their rows as a rewind to N would leave them.

The beliefs and mental-models timeline tables (`memory/timeline_tables.py`) register these
as their `details`: the preview (`studio.saves.checkpoints.CheckpointManager.preview`) asks
the registry (`timeline.preview_details`) and names no table. `belief_after` / `model_after`
turn a row's fields as a rewind to N would leave them (the storage layer's rollback rules,
`BELIEF_ROLLBACK.values_at` and `MODEL_ROLLBACK.values_at`) into the rows a preview shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from studio.memory.mental_models import MODEL_ROLLBACK, MentalModel, mental_models_to_roll_back
from studio.memory.models import MentalModel as MentalModelRow
from studio.memory.models import Observation as ObservationRow
from studio.memory.observations import BELIEF_ROLLBACK, Observation, beliefs_to_roll_back

__all__ = ["BeliefChange", "ModelChange", "belief_after", "model_after", "belief_details", "model_details"]


@dataclass
class BeliefChange:
    """A belief a rewind would roll back: as it is now, and as it would be after."""

    before: Observation
    after: Observation
    restored: bool = False  # it was DELETEd after the target and comes back


@dataclass
class ModelChange:
    """A mental model a rewind would roll back: as it is now, and as it would be after."""

    before: MentalModel
    after: MentalModel


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


def belief_details(save, n: int) -> dict[str, list]:
    """The beliefs a rewind to `n` deletes (held ones) and rolls back (retired ones it brings back
    among them, `restored`), most recently updated first."""
    doomed, changed = beliefs_to_roll_back(save.pk, n)
    beliefs_changed = []
    for row in changed.order_by("-updated_turn_id", "-id"):
        values = BELIEF_ROLLBACK.values_at(row, n)
        restored = row.deleted_turn_id is not None and values["deleted_turn_id"] is None
        if row.deleted_turn_id is not None and not restored:
            continue
        beliefs_changed.append(
            BeliefChange(before=Observation.from_row(row), after=belief_after(row, values), restored=restored)
        )
    return {
        "beliefs_deleted": [
            Observation.from_row(r)
            for r in doomed.filter(deleted_turn_id__isnull=True).order_by("-updated_turn_id", "-id")
        ],
        "beliefs_changed": beliefs_changed,
    }


def model_details(save, n: int) -> dict[str, list]:
    """The mental models a rewind to `n` deletes and rolls back (with their state after it, stale)."""
    doomed, changed = mental_models_to_roll_back(save.pk, n)
    return {
        "mental_models_deleted": [MentalModel.from_row(r) for r in doomed.order_by("-updated_turn_id", "-id")],
        "mental_models_changed": [
            ModelChange(before=MentalModel.from_row(row), after=model_after(row, MODEL_ROLLBACK.values_at(row, n)))
            for row in changed.order_by("-updated_turn_id", "-id")
        ],
    }
