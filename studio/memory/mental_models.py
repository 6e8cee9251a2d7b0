"""Mental-model storage for "living" memory mode (engine API `axiom.mental_models`).

A mental model is a curated profile, one per subject (a character, or "" for the world),
above the beliefs in the recall hierarchy:

    mental model -> beliefs (observations) -> facts -> raw narrative chunks

Deterministic storage and rollback only; the LLM that writes the summary lives in
`studio.memory.reflect`. There is at most one model per (save, subject): refresh is an
UPSERT.

Rollback. Rewinding to turn N drops every model created after N; a survivor refreshed after
N is flagged stale with `updated_turn_id` clamped to N, as in the seed. Where the seed keeps
the later summary "as a graceful fallback", here each refresh is kept in `versions`
(summary, turn, sources) and the rewind restores the version as of N, so no summary written
after N survives the rewind. See docs/living-memory.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q

from studio.memory.models import MentalModel as MentalModelRow
from studio.memory.models import subject_key_for
from studio.memory.turn_rows import RowRollback, bounded_read, save_pk_for

__all__ = [
    "MentalModel",
    "upsert_mental_model",
    "get_mental_models",
    "count_mental_models",
    "stale_subjects",
    "rollback_mental_models",
    "rollback_mental_models_standalone",
    "restore_model_as_of",
    "mental_models_to_roll_back",
]


@dataclass
class MentalModel:
    """One curated profile for a subject (a character, or "" for the world).

    `sources` lists the observation ids the summary was built from.
    """

    subject: str
    summary: str
    sources: list[int] = field(default_factory=list)
    created_turn_id: int = 0
    updated_turn_id: int = 0
    stale: bool = False
    model_id: int | None = None

    @classmethod
    def from_row(cls, row: MentalModelRow) -> "MentalModel":
        return cls(
            subject=row.subject,
            summary=row.summary,
            sources=list(row.sources or []),
            created_turn_id=row.created_turn_id,
            updated_turn_id=row.updated_turn_id,
            stale=row.stale,
            model_id=row.pk,
        )


def _clean_ids(values) -> list[int]:
    out: list[int] = []
    for v in values or []:
        try:
            i = int(v)
        except (TypeError, ValueError):
            continue
        if i not in out:
            out.append(i)
    return out


def _version(summary: str, turn_id: int, sources: list[int]) -> dict[str, Any]:
    return {"turn_id": int(turn_id), "summary": summary, "sources": list(sources)}


def upsert_mental_model(
    save_id: str, subject: str, summary: str, turn_id: int, sources: list[int] | None = None
) -> int | None:
    """Create or refresh the mental model for `subject` and return its model_id.

    At most one model per (save, subject), matched case-insensitively: an existing one is
    updated in place (`created_turn_id` kept, stale flag cleared), otherwise a new one is
    inserted. Each refresh is also appended to the model's `versions` so a rewind can
    restore the summary as it stood at an earlier turn. Blank summaries are skipped (None).
    """
    text = (summary or "").strip()
    if not text:
        return None
    save_pk = save_pk_for(save_id)
    name = (subject or "").strip()
    key = subject_key_for(name)
    turn = int(turn_id)
    ids = _clean_ids(sources)
    for _attempt in range(2):
        try:
            with transaction.atomic():
                row = MentalModelRow.objects.select_for_update().filter(game_save_id=save_pk, subject_key=key).first()
                if row is None:
                    row = MentalModelRow(
                        game_save_id=save_pk,
                        subject=name,
                        summary=text,
                        sources=ids,
                        versions=[_version(text, turn, ids)],
                        created_turn_id=turn,
                        updated_turn_id=turn,
                    )
                    row.save()
                    return row.pk
                versions = [v for v in row.versions or [] if int(v.get("turn_id") or 0) != turn]
                versions.append(_version(text, turn, ids))
                versions.sort(key=lambda v: int(v.get("turn_id") or 0))
                row.summary = text
                row.sources = ids
                row.versions = versions
                row.updated_turn_id = max(row.updated_turn_id, turn)
                row.stale = False
                row.save()
                return row.pk
        except IntegrityError:
            # Two refreshes raced to insert the same subject: the loser updates instead.
            continue
    raise RuntimeError(f"could not upsert the mental model for {name!r}")


def get_mental_models(
    save_id: str,
    *,
    max_turn_id: int | None = None,
    subject: str | None = None,
    limit: int | None = None,
) -> list[MentalModel]:
    """Fetch a save's mental models, most recently updated first.

    `max_turn_id` keeps models created at turns <= it (the rewind horizon); `subject` keeps
    the model for that subject (case-insensitive; "" is the world model); `limit` caps rows.
    """
    return bounded_read(
        MentalModelRow.objects.filter(game_save_id=save_pk_for(save_id)),
        turn_field="created_turn_id",
        max_turn_id=max_turn_id,
        subject=subject,
        order_by=("-updated_turn_id", "-id"),
        limit=limit,
        convert=MentalModel.from_row,
    )


def count_mental_models(save_id: str) -> int:
    """Return the number of stored mental models for a save (a cheap COUNT)."""
    return MentalModelRow.objects.filter(game_save_id=save_pk_for(save_id)).count()


def stale_subjects(save_id: str, *, max_turn_id: int | None = None, limit: int = 5) -> list[str]:
    """Return the subjects whose model is flagged stale, oldest update first, capped.

    A rewind flags survivors stale; the refresh job uses this to regenerate them even when
    their beliefs do not change again. `max_turn_id` keeps models created at turns <= it.
    """
    if limit is not None and limit <= 0:
        return []
    qs = MentalModelRow.objects.filter(game_save_id=save_pk_for(save_id), stale=True).values_list("subject", flat=True)
    return bounded_read(
        qs, turn_field="created_turn_id", max_turn_id=max_turn_id, order_by=("updated_turn_id", "id"), limit=limit
    )


def restore_model_as_of(
    *, summary: str, sources: list, versions: list[dict], updated_turn_id: int, target_turn_id: int
) -> dict[str, Any]:
    """Return the field values a surviving model had at `target_turn_id`.

    The latest version at or before the target gives the summary and sources; later versions
    are dropped. A model without versions (written elsewhere) keeps its summary, the seed's
    fallback. `updated_turn_id` is clamped to the target and the model flagged stale.
    """
    n = target_turn_id
    kept = [dict(v) for v in versions or [] if int(v.get("turn_id") or 0) <= n]
    if kept:
        summary = kept[-1].get("summary") or summary
        sources = _clean_ids(kept[-1].get("sources"))
    return {
        "summary": summary,
        "sources": list(sources or []),
        "versions": kept,
        "updated_turn_id": min(int(updated_turn_id), n),
        "stale": True,
    }


ROLLBACK_FIELDS = ["summary", "sources", "versions", "updated_turn_id", "stale"]


# Models created after N go; a survivor refreshed after N gets back its version as of N.
MODEL_ROLLBACK = RowRollback(
    model=MentalModelRow,
    created_field="created_turn_id",
    changed=lambda n: Q(updated_turn_id__gt=n),
    restore=restore_model_as_of,
    restore_from=("summary", "sources", "versions", "updated_turn_id"),
    write_fields=tuple(ROLLBACK_FIELDS),
)


def mental_models_to_roll_back(save_pk: int, target_turn_id: int):
    """Return (models created after the target, survivors refreshed after it) as querysets."""
    return MODEL_ROLLBACK.split(save_pk, target_turn_id)


def rollback_mental_models_for_pk(save_pk: int, target_turn_id: int) -> dict[str, int]:
    """`rollback_mental_models` for the save whose integer key is `save_pk`, in the caller's transaction."""
    return MODEL_ROLLBACK.roll_back(save_pk, target_turn_id)


def rollback_mental_models(save_id: str, target_turn_id: int) -> dict[str, int]:
    """Roll a save's mental models back to their state at `target_turn_id`.

    Runs in the caller's transaction (the `conn` of the engine API), so
    `CheckpointManager.rewind` rolls models back atomically with events, facts and beliefs.
    Models created after the target are deleted; a model refreshed after it gets back the
    summary and sources of its version as of the target, `updated_turn_id` clamped to the
    target, and is flagged stale so the next refresh regenerates it from the rewound
    beliefs.

    Return {"deleted": n, "updated": m}.
    """
    return MODEL_ROLLBACK.roll_back_save(save_id, target_turn_id)


def rollback_mental_models_standalone(save_id: str, target_turn_id: int) -> dict[str, int]:
    """Standalone variant of `rollback_mental_models` with its own transaction."""
    return MODEL_ROLLBACK.roll_back_save(save_id, target_turn_id)
