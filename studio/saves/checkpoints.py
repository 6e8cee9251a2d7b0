"""Checkpoints: rewind a save to turn N, preview that rewind, or fork the save at turn N.

What a turn owns is in the timeline registry (`studio.memory.timeline`): every table keyed
by save and turn is registered there at start-up by the app that owns it (`saves` and
`memory`'s `timeline_tables.py`), with how it rolls back after N, counts what a rewind would
drop (the preview's counts, sentence and lists) and copies up to N for a fork. Rewind,
preview and fork loop over it; none of them names a table.

Rewind is one database transaction, the registry's rewind (`studio.memory.rewind`, which
the demo's trim runs too): every registered table is rolled back to N (the
Event_Log, StateCache, facts, recorded queries, lore activation rows, narrator snapshots
and drafts after N are deleted, so sticky, cooldown and first matches are as they were
recorded at N; the belief and mental-model rollback rules are applied, see
`studio.memory.observations` and `studio.memory.mental_models`), the save's current turn set
to N and its timeline generation incremented. The vector chunks after N live in Chroma,
outside the transaction, so they are deleted after commit: the transaction records a
VECTOR_ROLLBACK job in the job ledger (`studio.memory.jobs`), and right after the commit
the rewind runs that job itself (`jobs.run_now`). Memory queries always use the save's
current turn as their horizon, so a chunk that survived a failed delete is never returned;
the ledger retries the job with backoff, and `finish_vector_rollback(save)` runs what is
still pending at once (a turn append does, before the timeline grows again).

Fork copies a save as it stood at turn N into a new save: every registered table that a
fork carries, as it stood at N (new ids for every row, fact ids remapped in belief sources,
belief ids remapped in mental-model sources; the fork takes the source's timeline
generation, from which it counts its own rewinds, so its seeded lore rolls after N are the
source's), and copies the vector chunks after commit as a FORK_VECTORS job, run the same
way; the original is untouched. Work the source had not finished for turns <= N (its latest
embedding or living job of a turn not done: queued, running, paused, failed, skipped) is
done again for the fork, so the fork ends with the memory a finished source has: the copy
job embeds those turns after copying (it cannot clear them), and the fork queues its own
living jobs for them, in turn order; the tables' `forked` hooks queue the rest of the
source's unfinished work (the chapter summaries pending at N, a refresh of the mental models
the fork holds stale). The jobs' handlers are in `studio.saves.vector_jobs` (registered by
`SavesConfig.ready()`).

With `expected_current_turn`, a rewind first checks, under the save's lock, that the save
is still at that turn, and raises `TurnConflict` (nothing changed) if it moved on.

All work is set-based: deletes are single statements, and only the beliefs and models that
changed after N are read and rewritten (one bulk UPDATE per 500 rows).
"""

from __future__ import annotations

import operator
import time
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from studio.memory import jobs, timeline
from studio.memory.rewind import timeline_rewind
from studio.plural import counted
from studio.memory.mental_models import MentalModel
from studio.memory.models import Job, JobKind, JobStatus
from studio.memory.observations import Observation
from studio.memory.rewind_details import BeliefChange, ModelChange
from studio.saves.errors import TurnConflict
from studio.world.models import Event, Save
from studio.saves.vector_jobs import PENDING_STATUSES

__all__ = [
    "RewindError",
    "InvalidTurnError",
    "RewindResult",
    "RewindPreview",
    "BeliefChange",
    "ModelChange",
    "CheckpointManager",
    "TurnConflict",
]


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
        raise InvalidTurnError(f"The target turn must be a whole number, not {target_turn!r}.") from None
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

    def rewind(self, save: Save, target_turn: int, *, expected_current_turn: int | None = None) -> RewindResult:
        """Rewind `save` to `target_turn` and return the counts per kind.

        Every database change happens in one transaction; the vector delete runs after
        commit (immediately, unless the caller holds an outer transaction, in which case it
        runs when that commits and `vector_pending` is True in the result). A vector failure
        does not undo the rewind: it is recorded on the VECTOR_ROLLBACK job (`vector_pending`,
        `vector_error`), retried by the job ledger with backoff, and run at once by
        `finish_vector_rollback(save)`. `save` is updated in place.

        With `expected_current_turn`, raise `TurnConflict` (nothing changed) unless the save,
        locked, is still at that turn. Raise `InvalidTurnError` (a ValueError) for a negative
        or non-integer turn. A target at or after the current turn changes nothing and says
        so in `message`.
        """
        n = _check_turn(target_turn)
        outcome: dict[str, Any] = {}
        started = time.perf_counter()
        with transaction.atomic():
            locked = Save.objects.select_for_update().get(pk=save.pk)
            if expected_current_turn is not None and expected_current_turn != locked.current_turn:
                raise TurnConflict(
                    f"Save {locked.save_id} is at turn {locked.current_turn}, not {expected_current_turn}: "
                    "it changed since you read it.",
                    save_id=locked.save_id,
                    current_turn=locked.current_turn,
                )
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
            from_turn = locked.current_turn
            # The registry's rewind (`studio.memory.rewind`): every per-turn table in registry order,
            # the jobs carried to the new generation, the save moved; its `rewound` hooks after the job below.
            counts: dict[str, int | None] = dict(timeline_rewind(locked, n, hooks=False))
            generation = locked.timeline_generation
            # This rewind runs the job itself after commit: no runner is woken for it.
            job = jobs.job_create(
                wake=False,
                kind=JobKind.VECTOR_ROLLBACK,
                universe_id=locked.universe_id,
                game_save_id=pk,
                turn_id=n,
                timeline_generation=generation,
                progress=f"delete vector chunks after turn {n}",
                payload={"target_turn": n, "from_turn": from_turn},
            )
            save_id = locked.save_id

            def after_commit(job_pk=job.pk):
                # Callbacks run right after COMMIT: the DB part's time includes the commit.
                outcome["db_seconds"] = time.perf_counter() - started
                outcome.update(self._run_vector_job(job_pk))

            # Registered before the tables' hooks queue work (a refresh of rolled-back mental models):
            # the delete runs first.
            transaction.on_commit(after_commit, robust=True)
            timeline.rewound(locked, n, counts)
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

    def _run_job_now(self, job_pk: int) -> tuple[jobs.Outcome, float]:
        """Run one of this manager's vector jobs here, through the ledger, with its store."""
        started = time.perf_counter()
        outcome = jobs.run_now(job_pk, vectors=lambda: self.vector_memory, take_failed=True)
        return outcome, time.perf_counter() - started

    def _run_vector_job(self, job_pk: int) -> dict[str, Any]:
        """Run a VECTOR_ROLLBACK job now; return {"deleted", "seconds"} or {"error", "seconds"}."""
        outcome, seconds = self._run_job_now(job_pk)
        if outcome.status != JobStatus.DONE:
            return {"error": outcome.error or f"job {job_pk} is {outcome.status}", "seconds": seconds}
        return {"deleted": outcome.result.get("deleted"), "seconds": outcome.result.get("seconds", seconds)}

    def pending_vector_rollbacks(self, save: Save):
        """Return the save's vector deletes not yet confirmed done, lowest target first."""
        return Job.objects.filter(
            game_save_id=save.pk, kind=JobKind.VECTOR_ROLLBACK, status__in=PENDING_STATUSES
        ).order_by("turn_id", "pk")

    def has_pending_vector_rollback(self, save: Save) -> bool:
        """True when a vector delete of an earlier rewind has not completed yet."""
        return self.pending_vector_rollbacks(save).exists()

    def finish_vector_rollback(self, save: Save) -> dict[str, Any]:
        """Run the save's pending vector deletes now; return {"done", "failed", "error"}.

        The lowest pending target is run first; its success covers every later one. Each
        run is an attempt on its job in the ledger (counted, recorded, retried with backoff
        while attempts are left). Safe to call at any time (it does nothing when nothing is
        pending), and meant to be called before a new turn is appended after a failed
        delete. Must not run inside an open transaction that could still roll back.
        """
        done = failed = 0
        error = ""
        tried: set[int] = set()
        while True:
            job = self.pending_vector_rollbacks(save).exclude(pk__in=tried).first()
            if job is None:
                break
            tried.add(job.pk)
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
        counts = timeline.count_rollback(current, n)
        return RewindPreview(
            save_id=current.save_id,
            from_turn=current.current_turn,
            target_turn=n,
            changed=True,
            message=(
                f"Rewinding save {current.save_id} from turn {current.current_turn} to turn {n} "
                f"{timeline.preview_sentence(counts, counted)}."
            ),
            counts=counts,
            # What the tables list of their rows (the beliefs and mental models, before and after).
            **timeline.preview_details(current, n),
        )

    # -- fork -------------------------------------------------------------------------------

    def fork(self, save: Save, target_turn: int, *, name: str | None = None) -> Save:
        """Return a new save that is a copy of `save` as it stood at `target_turn`.

        Events, state, facts (new ids), beliefs (sources remapped to the new fact ids) and
        mental models (sources remapped to the new belief ids) are copied in one
        transaction; rows that changed after the target are copied as a rewind would leave
        them. The vector chunks up to the target are copied after commit through
        `copy_save`, as the fork's FORK_VECTORS job: a failure is recorded on it and retried
        by the job ledger with backoff; `finish_fork_vectors(fork)` runs it at once. The
        original save is not changed.

        Raise `InvalidTurnError` for a negative or non-integer turn, or one after the
        save's current turn.
        """
        n = _check_turn(target_turn)
        with transaction.atomic():
            source = Save.objects.select_for_update().get(pk=save.pk)
            if n > source.current_turn:
                raise InvalidTurnError(
                    f"Cannot fork save {source.save_id} at turn {n}: it is only at turn {source.current_turn}."
                )
            fork = Save.objects.create(
                universe_id=source.universe_id,
                name=((name or "").strip() or f"{source.name} (fork at turn {n})")[:200],
                memory_mode=source.memory_mode,
                beliefs_enabled=source.beliefs_enabled,
                current_turn=n,
                timeline_generation=source.timeline_generation,
                meta=dict(source.meta or {}),
                forked_from=source,
                fork_turn=n,
            )
            # Every per-turn table as it stood at n, in registry order (`studio.memory.timeline`).
            timeline.copy_up_to(source=source, fork=fork, target_turn=n)
            copy_play_settings(source=source, fork=fork)
            # The source's turns <= n whose memory work is not done yet: the fork does it itself.
            unfinished = jobs.jobs_unfinished_up_to(game_save=source, turn=n)
            events = dict(
                Event.objects.filter(game_save_id=fork.pk, turn_id__in={j.turn_id for j in unfinished}).values_list(
                    "turn_id", "pk"
                )
            )
            embed = sorted({j.turn_id for j in unfinished if j.kind == JobKind.EMBED_TURN and j.turn_id in events})
            # This fork runs the job itself after commit: no runner is woken for it.
            job = jobs.job_create(
                wake=False,
                kind=JobKind.FORK_VECTORS,
                universe_id=source.universe_id,
                game_save_id=fork.pk,
                turn_id=n,
                timeline_generation=fork.timeline_generation,
                progress=f"copy vector chunks of {source.save_id} up to turn {n}",
                payload={
                    "source_save_id": source.save_id,
                    "max_turn_id": n,
                    # embedded by the copy, after it: {turn: the fork's Event pk}
                    "embed_turns": [[turn, events[turn]] for turn in embed],
                },
            )
            transaction.on_commit(lambda: self._run_fork_job(job.pk), robust=True)
            if fork.is_living:
                # Queued after the copy's callback, in turn order: the living jobs run as the
                # source's would have, on the memory copied (which has nothing of these turns).
                for row in unfinished:
                    if row.kind == JobKind.LIVING_TURN and row.turn_id in events:
                        jobs.enqueue_living_turn(
                            game_save=fork,
                            turn_id=row.turn_id,
                            event_id=events[row.turn_id],
                            reextract=bool((row.payload or {}).get("reextract")),
                        )
        return fork

    def _run_fork_job(self, job_pk: int) -> dict[str, Any]:
        """Run a FORK_VECTORS job now; return {"copied"} or {"error"}."""
        outcome, _seconds = self._run_job_now(job_pk)
        if outcome.status != JobStatus.DONE:
            return {"error": outcome.error or f"job {job_pk} is {outcome.status}"}
        return {"copied": outcome.result.get("copied")}

    def finish_fork_vectors(self, fork: Save) -> dict[str, Any]:
        """Run a fork's vector copy now if it has not completed; return {"done", "error"}."""
        job = (
            Job.objects.filter(game_save_id=fork.pk, kind=JobKind.FORK_VECTORS, status__in=PENDING_STATUSES)
            .order_by("pk")
            .first()
        )
        if job is None:
            return {"done": 0, "error": ""}
        outcome = self._run_fork_job(job.pk)
        return {"done": 0 if outcome.get("error") else 1, "error": outcome.get("error", "")}


def copy_play_settings(*, source: Save, fork: Save) -> None:
    """Give a fork the source's play settings (author's note, sampler): not per turn, copied as they are."""
    from studio.saves.models import PlaySettings

    row = PlaySettings.objects.filter(game_save=source).first()
    if row is not None:
        row.pk = None
        row.id = None
        row.game_save = fork
        row._state.adding = True
        row.save()
