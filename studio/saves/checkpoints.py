"""Checkpoints: rewind a save to turn N, preview that rewind, or fork the save at turn N.

Rewind is one database transaction: Event_Log, StateCache, Facts and recorded queries after N
are deleted, the belief and mental-model rollback rules applied (see
`studio.memory.observations` and `studio.memory.mental_models`), the save's current turn set
to N and its timeline generation incremented. The vector chunks after N live in Chroma,
outside the transaction, so they are deleted after commit (`transaction.on_commit`). Memory
queries always use the save's current turn as their horizon, so a chunk that survived a
failed delete is never returned; the pending delete is recorded as a VECTOR_ROLLBACK Job in
the same transaction, and `finish_vector_rollback(save)` retries it.

Fork copies a save as it stood at turn N into a new save (new ids for every row, fact ids
remapped in belief sources, belief ids remapped in mental-model sources) and copies the
vector chunks after commit; the original is untouched.

All work is set-based: deletes are single statements, and only the beliefs and models that
changed after N are read and rewritten (one bulk UPDATE per 500 rows).
"""
from __future__ import annotations

import logging
import operator
import time
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from studio.memory.facts import delete_facts_after
from studio.memory.mental_models import MentalModel, models_to_roll_back, restore_model_as_of
from studio.memory.mental_models import rollback_models_for_pk
from studio.memory.models import Fact as FactRow
from studio.memory.models import Job, JobKind, JobStatus, RecordedQuery
from studio.memory.models import MentalModel as MentalModelRow
from studio.memory.models import Observation as ObservationRow
from studio.memory.observations import Observation, beliefs_to_roll_back, restore_belief_as_of
from studio.memory.observations import rollback_beliefs_for_pk
from studio.saves.models import Event, Save, StateCache

logger = logging.getLogger(__name__)

__all__ = [
    "RewindError",
    "InvalidTurnError",
    "RewindResult",
    "RewindPreview",
    "BeliefChange",
    "ModelChange",
    "CheckpointManager",
]

PENDING_STATUSES = (JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.FAILED)


class RewindError(ValueError):
    """A rewind or fork that cannot be done as asked."""


class InvalidTurnError(RewindError):
    """The target turn is not a non-negative integer (or lies beyond the save's turn)."""


def _check_turn(target_turn: Any) -> int:
    if isinstance(target_turn, bool):
        raise InvalidTurnError(f"The target turn must be a whole number, not {target_turn!r}.")
    try:
        n = operator.index(target_turn)
    except TypeError:
        raise InvalidTurnError(
            f"The target turn must be a whole number, not {target_turn!r}."
        ) from None
    if n < 0:
        raise InvalidTurnError(f"The target turn must be 0 or more, not {n}.")
    return n


@dataclass
class RewindResult:
    """What a rewind did. `counts` has one entry per kind of row removed or changed."""

    save_id: str
    from_turn: int
    target_turn: int
    changed: bool
    message: str
    counts: dict[str, int | None] = field(default_factory=dict)
    timeline_generation: int = 0
    vector_pending: bool = False
    vector_error: str = ""
    db_seconds: float = 0.0
    vector_seconds: float = 0.0


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


@dataclass
class RewindPreview:
    """What a rewind to `target_turn` would delete or change; nothing is changed."""

    save_id: str
    from_turn: int
    target_turn: int
    changed: bool
    message: str
    counts: dict[str, int] = field(default_factory=dict)
    beliefs_deleted: list[Observation] = field(default_factory=list)
    beliefs_changed: list[BeliefChange] = field(default_factory=list)
    mental_models_deleted: list[MentalModel] = field(default_factory=list)
    mental_models_changed: list[ModelChange] = field(default_factory=list)


def _noop_message(save: Save, n: int) -> str:
    return (
        f"Nothing to rewind: save {save.save_id} is at turn {save.current_turn}, and turn {n} "
        f"is not before it. A rewind only goes back to an earlier turn."
    )


def _belief_after(row: ObservationRow, values: dict[str, Any]) -> Observation:
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


def _model_after(row: MentalModelRow, values: dict[str, Any]) -> MentalModel:
    return MentalModel(
        subject=row.subject,
        summary=values["summary"],
        sources=values["sources"],
        created_turn_id=row.created_turn_id,
        updated_turn_id=values["updated_turn_id"],
        stale=values["stale"],
        model_id=row.pk,
    )


def _belief_values(row: ObservationRow, n: int) -> dict[str, Any]:
    return restore_belief_as_of(
        statement=row.statement,
        subject=row.subject,
        sources=row.sources,
        history=row.history,
        updated_turn_id=row.updated_turn_id,
        deleted_turn_id=row.deleted_turn_id,
        target_turn_id=n,
    )


def _model_values(row: MentalModelRow, n: int) -> dict[str, Any]:
    return restore_model_as_of(
        summary=row.summary,
        sources=row.sources,
        versions=row.versions,
        updated_turn_id=row.updated_turn_id,
        target_turn_id=n,
    )


class CheckpointManager:
    """Rewind, rewind preview and fork for saves.

    `vector_memory` is the object whose `rollback(save_id, target_turn_id)` and
    `copy_save(src_save_id, dst_save_id, max_turn_id=...)` handle the Chroma chunks; by
    default `studio.memory.vector.get_vector_memory()`, resolved when first needed.
    """

    def __init__(self, vector_memory=None):
        self._vector_memory = vector_memory

    @property
    def vector_memory(self):
        if self._vector_memory is None:
            from studio.memory.vector import get_vector_memory

            self._vector_memory = get_vector_memory()
        return self._vector_memory

    # -- rewind -----------------------------------------------------------------------------

    def rewind(self, save: Save, target_turn: int) -> RewindResult:
        """Rewind `save` to `target_turn` and return the counts per kind.

        Every database change happens in one transaction; the vector delete runs after
        commit (immediately, unless the caller holds an outer transaction, in which case it
        runs when that commits and `vector_pending` is True in the result). A vector failure
        does not undo the rewind: it is recorded (`vector_pending`, `vector_error`) and
        `finish_vector_rollback(save)` retries it. `save` is updated in place.

        Raise `InvalidTurnError` (a ValueError) for a negative or non-integer turn. A target
        at or after the current turn changes nothing and says so in `message`.
        """
        n = _check_turn(target_turn)
        outcome: dict[str, Any] = {}
        started = time.perf_counter()
        with transaction.atomic():
            locked = Save.objects.select_for_update().get(pk=save.pk)
            if n >= locked.current_turn:
                return RewindResult(
                    save_id=locked.save_id,
                    from_turn=locked.current_turn,
                    target_turn=n,
                    changed=False,
                    message=_noop_message(locked, n),
                    timeline_generation=locked.timeline_generation,
                )
            pk = locked.pk
            counts: dict[str, int | None] = {}
            counts["events"], _ = Event.objects.filter(game_save_id=pk, turn_id__gt=n).delete()
            counts["states"], _ = StateCache.objects.filter(game_save_id=pk, turn_id__gt=n).delete()
            counts["facts"] = delete_facts_after(pk, n)
            beliefs = rollback_beliefs_for_pk(pk, n)
            counts["beliefs_deleted"] = beliefs["deleted"]
            counts["beliefs_updated"] = beliefs["updated"]
            models = rollback_models_for_pk(pk, n)
            counts["mental_models_deleted"] = models["deleted"]
            counts["mental_models_updated"] = models["updated"]
            counts["recorded_queries"], _ = RecordedQuery.objects.filter(
                game_save_id=pk, turn_id__gt=n
            ).delete()
            generation = locked.timeline_generation + 1
            Save.objects.filter(pk=pk).update(
                current_turn=n, timeline_generation=generation, updated_at=timezone.now()
            )
            job = Job.objects.create(
                kind=JobKind.VECTOR_ROLLBACK,
                universe_id=locked.universe_id,
                game_save_id=pk,
                turn_id=n,
                timeline_generation=generation,
                status=JobStatus.RUNNING,
                progress=f"delete vector chunks after turn {n}",
                payload={"target_turn": n, "from_turn": locked.current_turn},
            )
            from_turn = locked.current_turn
            save_id = locked.save_id
            if counts["mental_models_updated"] and locked.is_living:
                # Regenerate the rewound (stale) profiles from the rewound beliefs; the job
                # carries the new generation, so it runs against this timeline.
                from studio.memory.jobs import enqueue_refresh_models

                locked.current_turn, locked.timeline_generation = n, generation
                enqueue_refresh_models(game_save=locked)

            def after_commit(job_pk=job.pk):
                # Callbacks run right after COMMIT: the DB part's time includes the commit.
                outcome["db_seconds"] = time.perf_counter() - started
                outcome.update(self._run_vector_job(job_pk))

            transaction.on_commit(after_commit, robust=True)
            db_seconds = time.perf_counter() - started  # inside an outer transaction: no commit yet
        save.current_turn = n
        save.timeline_generation = generation
        counts["vector_chunks"] = outcome.get("deleted")
        db_seconds = outcome.pop("db_seconds", db_seconds)
        message = f"Rewound save {save_id} from turn {from_turn} to turn {n}."
        if not outcome:
            message += " The vector chunks after it are deleted when the transaction commits."
        elif outcome.get("error"):
            message += (
                " The vector chunks after it could not be deleted yet "
                f"({outcome['error']}); they stay hidden from queries until the retry succeeds."
            )
        return RewindResult(
            save_id=save_id,
            from_turn=from_turn,
            target_turn=n,
            changed=True,
            message=message,
            counts=counts,
            timeline_generation=generation,
            vector_pending=not outcome or bool(outcome.get("error")),
            vector_error=outcome.get("error", ""),
            db_seconds=db_seconds,
            vector_seconds=outcome.get("seconds", 0.0),
        )

    def _run_vector_job(self, job_pk: int) -> dict[str, Any]:
        """Run one VECTOR_ROLLBACK job (after commit); record success or failure on the Job."""
        job = Job.objects.select_related("game_save").get(pk=job_pk)
        save = job.game_save
        target = job.turn_id
        started = time.perf_counter()
        now = timezone.now()
        try:
            vector = self.vector_memory
            deleted = vector.rollback(save.save_id, target)
            # Turns played again after a failed delete: their chunks were mixed with the
            # dead timeline's, so delete > target and re-embed the replayed narratives.
            replayed = 0
            if save.current_turn > target:
                for turn_id, narrative in (
                    Event.objects.filter(game_save_id=save.pk, turn_id__gt=target)
                    .order_by("turn_id")
                    .values_list("turn_id", "narrative")
                ):
                    vector.update_turn_narrative(save.save_id, turn_id, narrative)
                    replayed += 1
        except Exception as exc:  # noqa: BLE001 - any store failure is recorded for a retry
            logger.warning("vector rollback of %s to turn %s failed: %s", save.save_id, target, exc)
            Job.objects.filter(pk=job_pk).update(
                status=JobStatus.FAILED,
                error=f"{type(exc).__name__}: {exc}",
                attempts=F("attempts") + 1,
                started_at=now,
                finished_at=timezone.now(),
            )
            return {"error": f"{type(exc).__name__}: {exc}", "seconds": time.perf_counter() - started}
        seconds = time.perf_counter() - started
        deleted_count = deleted if isinstance(deleted, int) else None
        # One successful delete > target also covers every pending delete to a later turn.
        Job.objects.filter(
            game_save_id=save.pk,
            kind=JobKind.VECTOR_ROLLBACK,
            status__in=PENDING_STATUSES,
            turn_id__gte=target,
        ).exclude(pk=job_pk).update(
            status=JobStatus.DONE, progress=f"covered by job {job_pk}", finished_at=timezone.now()
        )
        Job.objects.filter(pk=job_pk).update(
            status=JobStatus.DONE,
            error="",
            attempts=F("attempts") + 1,
            result={"deleted": deleted_count, "replayed_turns": replayed, "seconds": seconds},
            started_at=now,
            finished_at=timezone.now(),
        )
        return {"deleted": deleted_count, "seconds": seconds}

    def pending_vector_rollbacks(self, save: Save):
        """Return the save's vector deletes not yet confirmed done, lowest target first."""
        return Job.objects.filter(
            game_save_id=save.pk, kind=JobKind.VECTOR_ROLLBACK, status__in=PENDING_STATUSES
        ).order_by("turn_id", "pk")

    def has_pending_vector_rollback(self, save: Save) -> bool:
        """True when a vector delete of an earlier rewind has not completed yet."""
        return self.pending_vector_rollbacks(save).exists()

    def finish_vector_rollback(self, save: Save) -> dict[str, Any]:
        """Retry the save's pending vector deletes; return {"done", "failed", "error"}.

        The lowest pending target is run first; its success covers every later one. Safe to
        call at any time (it does nothing when nothing is pending), and meant to be called
        before a new turn is appended after a failed delete. Must not run inside an open
        transaction that could still roll back.
        """
        done = failed = 0
        error = ""
        while True:
            job = self.pending_vector_rollbacks(save).first()
            if job is None:
                break
            outcome = self._run_vector_job(job.pk)
            if outcome.get("error"):
                failed += 1
                error = outcome["error"]
                break
            done += 1
        return {"done": done, "failed": failed, "error": error}

    # -- preview ----------------------------------------------------------------------------

    def preview(self, save: Save, target_turn: int) -> RewindPreview:
        """Return what `rewind(save, target_turn)` would delete or change, changing nothing.

        `counts` has the same keys as the rewind's (without the vector count); the lists
        hold the beliefs and mental models that would be deleted, and those that would be
        rolled back (with their state after the rewind, flagged stale). Retired beliefs a
        rewind would bring back appear among the changed ones with `restored=True`.
        """
        n = _check_turn(target_turn)
        current = Save.objects.get(pk=save.pk)
        if n >= current.current_turn:
            return RewindPreview(
                save_id=current.save_id,
                from_turn=current.current_turn,
                target_turn=n,
                changed=False,
                message=_noop_message(current, n),
            )
        pk = current.pk
        doomed_beliefs, changed_beliefs = beliefs_to_roll_back(pk, n)
        doomed_models, changed_models = models_to_roll_back(pk, n)
        beliefs_changed = []
        for row in changed_beliefs.order_by("-updated_turn_id", "-id"):
            values = _belief_values(row, n)
            restored = row.deleted_turn_id is not None and values["deleted_turn_id"] is None
            if row.deleted_turn_id is not None and not restored:
                continue
            beliefs_changed.append(
                BeliefChange(before=Observation.from_row(row), after=_belief_after(row, values), restored=restored)
            )
        models_changed = [
            ModelChange(before=MentalModel.from_row(row), after=_model_after(row, _model_values(row, n)))
            for row in changed_models.order_by("-updated_turn_id", "-id")
        ]
        counts = {
            "events": Event.objects.filter(game_save_id=pk, turn_id__gt=n).count(),
            "states": StateCache.objects.filter(game_save_id=pk, turn_id__gt=n).count(),
            "facts": FactRow.objects.filter(game_save_id=pk, turn_id__gt=n).count(),
            "beliefs_deleted": doomed_beliefs.count(),
            "beliefs_updated": changed_beliefs.count(),
            "mental_models_deleted": doomed_models.count(),
            "mental_models_updated": len(models_changed),
            "recorded_queries": RecordedQuery.objects.filter(game_save_id=pk, turn_id__gt=n).count(),
        }
        return RewindPreview(
            save_id=current.save_id,
            from_turn=current.current_turn,
            target_turn=n,
            changed=True,
            message=(
                f"Rewinding save {current.save_id} from turn {current.current_turn} to turn {n} "
                f"deletes {counts['events']} turns, {counts['facts']} facts, "
                f"{counts['beliefs_deleted']} beliefs and {counts['mental_models_deleted']} "
                f"mental models, and rolls back {len(beliefs_changed)} beliefs and "
                f"{len(models_changed)} mental models."
            ),
            counts=counts,
            beliefs_deleted=[
                Observation.from_row(r)
                for r in doomed_beliefs.filter(deleted_turn_id__isnull=True).order_by("-updated_turn_id", "-id")
            ],
            beliefs_changed=beliefs_changed,
            mental_models_deleted=[
                MentalModel.from_row(r) for r in doomed_models.order_by("-updated_turn_id", "-id")
            ],
            mental_models_changed=models_changed,
        )

    # -- fork -------------------------------------------------------------------------------

    def fork(self, save: Save, target_turn: int, *, name: str | None = None) -> Save:
        """Return a new save that is a copy of `save` as it stood at `target_turn`.

        Events, state, facts (new ids), beliefs (sources remapped to the new fact ids) and
        mental models (sources remapped to the new belief ids) are copied in one
        transaction; rows that changed after the target are copied as a rewind would leave
        them. The vector chunks up to the target are copied after commit through
        `copy_save`; a failure is recorded as a FORK_VECTORS Job and
        `finish_fork_vectors(fork)` retries it. The original save is not changed.

        Raise `InvalidTurnError` for a negative or non-integer turn, or one after the
        save's current turn.
        """
        n = _check_turn(target_turn)
        with transaction.atomic():
            source = Save.objects.select_for_update().get(pk=save.pk)
            if n > source.current_turn:
                raise InvalidTurnError(
                    f"Cannot fork save {source.save_id} at turn {n}: it is only at turn "
                    f"{source.current_turn}."
                )
            fork = Save.objects.create(
                universe_id=source.universe_id,
                name=((name or "").strip() or f"{source.name} (fork at turn {n})")[:200],
                memory_mode=source.memory_mode,
                beliefs_enabled=source.beliefs_enabled,
                current_turn=n,
                meta=dict(source.meta or {}),
                forked_from=source,
                fork_turn=n,
            )
            self._copy_turn_rows(Event, ["turn_id", "player_input", "narrative", "created_at"], source.pk, fork.pk, n)
            self._copy_turn_rows(StateCache, ["turn_id", "state"], source.pk, fork.pk, n)
            fact_ids = self._copy_facts(source.pk, fork.pk, n)
            belief_ids = self._copy_beliefs(source.pk, fork.pk, n, fact_ids)
            self._copy_models(source.pk, fork.pk, n, belief_ids)
            job = Job.objects.create(
                kind=JobKind.FORK_VECTORS,
                universe_id=source.universe_id,
                game_save_id=fork.pk,
                turn_id=n,
                status=JobStatus.RUNNING,
                progress=f"copy vector chunks of {source.save_id} up to turn {n}",
                payload={"source_save_id": source.save_id, "max_turn_id": n},
            )
            transaction.on_commit(lambda: self._run_fork_job(job.pk), robust=True)
        return fork

    @staticmethod
    def _copy_turn_rows(model, columns: list[str], source_pk: int, fork_pk: int, n: int) -> None:
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

    @staticmethod
    def _copy_facts(source_pk: int, fork_pk: int, n: int) -> dict[int, int]:
        rows = list(FactRow.objects.filter(game_save_id=source_pk, turn_id__lte=n).order_by("id"))
        old_ids = [r.pk for r in rows]
        for r in rows:
            r.pk = None
            r.id = None
            r.game_save_id = fork_pk
        created = FactRow.objects.bulk_create(rows, batch_size=2000)
        return {old: new.pk for old, new in zip(old_ids, created)}

    @staticmethod
    def _copy_beliefs(source_pk: int, fork_pk: int, n: int, fact_ids: dict[int, int]) -> dict[int, int]:
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
                for name, value in _belief_values(r, n).items():
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

    @staticmethod
    def _copy_models(source_pk: int, fork_pk: int, n: int, belief_ids: dict[int, int]) -> None:
        def remap(ids):
            return [belief_ids[int(i)] for i in ids or [] if int(i) in belief_ids]

        rows = list(MentalModelRow.objects.filter(game_save_id=source_pk, created_turn_id__lte=n).order_by("id"))
        for r in rows:
            if r.updated_turn_id > n:
                for name, value in _model_values(r, n).items():
                    setattr(r, name, value)
            r.sources = remap(r.sources)
            r.versions = [{**v, "sources": remap(v.get("sources"))} for v in r.versions or []]
            r.pk = None
            r.id = None
            r.game_save_id = fork_pk
        MentalModelRow.objects.bulk_create(rows)

    def _run_fork_job(self, job_pk: int) -> dict[str, Any]:
        """Copy the vector chunks of a fork (after commit); record the outcome on the Job."""
        job = Job.objects.select_related("game_save").get(pk=job_pk)
        fork = job.game_save
        now = timezone.now()
        try:
            vector = self.vector_memory
            if job.attempts:
                # A failed earlier attempt may have copied part of the chunks: start clean.
                vector.rollback(fork.save_id, -1)
            copied = vector.copy_save(job.payload["source_save_id"], fork.save_id, max_turn_id=job.turn_id)
        except Exception as exc:  # noqa: BLE001 - recorded for a retry
            logger.warning("vector copy for fork %s failed: %s", fork.save_id, exc)
            Job.objects.filter(pk=job_pk).update(
                status=JobStatus.FAILED,
                error=f"{type(exc).__name__}: {exc}",
                attempts=F("attempts") + 1,
                started_at=now,
                finished_at=timezone.now(),
            )
            return {"error": f"{type(exc).__name__}: {exc}"}
        Job.objects.filter(pk=job_pk).update(
            status=JobStatus.DONE,
            error="",
            attempts=F("attempts") + 1,
            result={"copied": copied if isinstance(copied, int) else None},
            started_at=now,
            finished_at=timezone.now(),
        )
        return {"copied": copied}

    def finish_fork_vectors(self, fork: Save) -> dict[str, Any]:
        """Retry a fork's vector copy if it has not completed; return the outcome."""
        job = (
            Job.objects.filter(game_save_id=fork.pk, kind=JobKind.FORK_VECTORS, status__in=PENDING_STATUSES)
            .order_by("pk")
            .first()
        )
        if job is None:
            return {"done": 0, "error": ""}
        outcome = self._run_fork_job(job.pk)
        return {"done": 0 if outcome.get("error") else 1, "error": outcome.get("error", "")}
