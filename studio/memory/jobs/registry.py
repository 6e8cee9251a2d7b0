"""The handler registry: which function runs each job kind, and what a handler is given.

Apps register their handlers at start-up, in `AppConfig.ready()` (memory: lore sync, turn
embedding, the living pipeline, model refresh; saves: the vector side of rewind and fork),
so the runner never imports an app: it looks the kind up here. A kind with no handler
fails at once with an error that says so.

A handler takes a `JobContext` (the claimed Job, the runner's identity, the vector store)
and either returns a result dict (the runner marks the job DONE with it) or writes through
`JobContext.commit`, which runs the writes and the DONE status in one transaction that
first

- locks the save row (`select_for_update`), so a rewind cannot interleave;
- checks the job is still held by this runner (a runner presumed dead must not write);
- checks the job is still on the save's live timeline (`job_timeline_check`): a
  rewind that dropped the job's turn means it writes nothing and ends skipped; one that kept
  the turn but rolled back memory the job read sends it back to the queue (`JobRedo`).

It raises `JobSkipped`, `JobPaused` or any exception for the other outcomes (see `ledger`).
A handler declares at registration whether its kind is claimed in batches (`run_batch`, or
`batches_in_order` for jobs run one by one sharing lookups), whether callers run it at
once (`immediate`), and what to do when one of its jobs could not be queued
(`on_not_queued`: the lore sync marks its entries failed, so no page shows them pending).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from studio.memory import hooks
from studio.memory.jobs.claims import ClaimRules
from studio.memory.jobs.ledger import (
    REDO_KEY,
    TURN_KINDS,
    JobLost,
    JobRedo,
    JobSkipped,
    mark_finished,
    owned_row,
)
from studio.memory.models import Job, JobKind, JobStatus

# Seconds between two progress writes of one job (the Jobs page polls every 2 s).
PROGRESS_INTERVAL = 0.5


def default_vector_memory():
    """Return the vector store jobs use unless their caller hands one in."""
    from studio.memory.vector import get_vector_memory

    return get_vector_memory()


def job_timeline_check(job: Job, save, row: Job | None = None) -> None:
    """Raise unless `job` may (still) write for `save`'s live timeline.

    `save` and `row` (the job's row) must be read together under the save's lock (see
    `JobContext.check_timeline`). JobSkipped: a rewind dropped the job's turn, or the turn
    is gone; JobRedo: a rewind kept the turn but changed what the job read.
    """
    if row is None:
        row = Job.objects.filter(pk=job.pk).only("timeline_generation", "turn_id", "payload").first()
        if row is None:
            raise JobSkipped("the job was deleted; nothing written")
    # A rewind may have moved the job to its new generation (and a refresh to its target).
    job.timeline_generation, job.turn_id = row.timeline_generation, row.turn_id
    if save.timeline_generation != row.timeline_generation:
        turn = f"turn {row.turn_id} was dropped" if row.turn_id is not None else "the job is from another timeline"
        raise JobSkipped(
            f"timeline rewound (generation {row.timeline_generation} -> {save.timeline_generation}); "
            f"{turn}, nothing written"
        )
    if row.turn_id is not None and job.kind in TURN_KINDS and row.turn_id > save.current_turn:
        raise JobSkipped(f"turn {row.turn_id} no longer exists; nothing written")
    reason = (row.payload or {}).get(REDO_KEY)
    if reason:
        raise JobRedo(reason)


@dataclass
class JobContext:
    """What the runner gives a handler for one claimed job."""

    job: Job
    worker: str
    timings: dict[str, float] = field(default_factory=dict)
    # Lookups shared by the jobs of one claimed batch (same save): lore names, missions,
    # the batch's narratives and states ("batch_turns" lists its turn ids).
    shared: dict = field(default_factory=dict)
    # Returns the vector store; None: `default_vector_memory` (resolved when first used,
    # inside the handler, so a store that cannot be opened is the job's failure).
    vector_provider: Callable[[], object] | None = None
    # What `commit` wrote as the job's result (for a caller running the job itself).
    result: dict | None = None
    # The claim just wrote "running": the first progress text waits PROGRESS_INTERVAL.
    progress_written: float = field(default_factory=time.monotonic)
    _vectors: object = field(default=None, repr=False)

    @property
    def vectors(self):
        """The vector store (`VectorMemory`'s public API)."""
        if self._vectors is None:
            provider = self.vector_provider or default_vector_memory
            self._vectors = provider()
        return self._vectors

    def cached(self, key: str, compute):
        """Return `shared[key]`, computing it the first time a job of the batch asks."""
        if key not in self.shared:
            self.shared[key] = compute()
        return self.shared[key]

    def save(self):
        """Return the job's save (with its universe), or None for a universe's job."""
        from studio.world.models import Save

        if self.job.game_save_id is None:
            return None
        return Save.objects.select_related("universe").get(pk=self.job.game_save_id)

    def progress(self, text: str, *, force: bool = False) -> None:
        """Show what the job is doing; at most one write per PROGRESS_INTERVAL (each is a
        write transaction, and a fast job would spend more on them than on its work)."""
        now = time.monotonic()
        if not force and now - self.progress_written < PROGRESS_INTERVAL:
            return
        self.progress_written = now
        Job.objects.filter(pk=self.job.pk, status=JobStatus.RUNNING).update(
            progress=text[:200], progress_at=timezone.now()
        )

    def check_timeline(self, save) -> None:
        """Raise JobSkipped unless the job's turn is on the save's live timeline (see `timeline`).

        Reads the save and the job's row together under the save's lock (a rewind moves both
        in one transaction) and refreshes `save`'s generation and current turn. Call before
        the job reads what it works on: a rewind that flagged the job to redo before it read
        anything is then simply cleared. (An embedding calls it again after its vector write:
        a rewind that dropped its turn meanwhile means the chunk is removed again.)
        """
        skipped = check_timelines([self], save)
        if skipped:
            raise skipped[self.job.pk]

    def commit(self, write, *, check_timeline: bool = True) -> dict:
        """Run `write(save)` and mark the job done, atomically, if the job may still write."""
        from studio.world.models import Save

        started = time.perf_counter()
        with transaction.atomic():
            save = None
            if self.job.game_save_id is not None:
                save = Save.objects.select_for_update().get(pk=self.job.game_save_id)
            row = owned_row(self.job.pk, self.worker)
            if row is None:
                raise JobLost()
            if check_timeline and save is not None:
                job_timeline_check(self.job, save, row)
            result = write(save) or {}
            self.timings["write_seconds"] = round(time.perf_counter() - started, 4)
            result = {**result, "timings": dict(self.timings)}
            mark_finished(row, JobStatus.DONE, progress="done", result=result)
        self.result = result
        return result


Handler = Callable[[JobContext], "dict | None"]
BatchHandler = Callable[[list[JobContext]], "dict[int, tuple[str, dict]]"]
NotQueuedHook = Callable[[Job, str], None]


@dataclass(frozen=True)
class JobHandler:
    """A registered kind: the function that runs one job, and how its jobs are claimed."""

    kind: str
    run: Handler
    # Runs several claimed jobs of the save at once; returns {job id: (status, detail)},
    # detail being {"progress", "result"?} (the runner closes them in one transaction).
    run_batch: BatchHandler | None = None
    # Several jobs claimed at once but run one by one in turn order (`run`), sharing lookups.
    batches_in_order: bool = False
    # Callers run the job right away (`runner.run_now`) instead of waiting for the scope's
    # runner: a rewind's vector delete after its commit, a retry from the Jobs page.
    immediate: bool = False
    # Called with (job, error) when the dispatcher could not hand a job of this kind to the
    # queue (the job is FAILED, retryable), so the kind's app can mark what waited on it.
    on_not_queued: NotQueuedHook | None = None

    @property
    def batched(self) -> bool:
        return self.run_batch is not None or self.batches_in_order


# The `job_kinds` extension point (`studio.memory.hooks`): one handler per kind, in JobKind order.
_handlers = hooks.extension_point(
    "job_kinds", name_of=lambda handler: handler.kind, order_of=lambda handler: JobKind.values.index(handler.kind)
)


def register(
    kind: str,
    run: Handler,
    *,
    run_batch: BatchHandler | None = None,
    batches_in_order: bool = False,
    immediate: bool = False,
    on_not_queued: NotQueuedHook | None = None,
) -> JobHandler:
    """Register (or replace) the handler of `kind`; call from `AppConfig.ready()`."""
    if kind not in JobKind.values:
        raise ValueError(f"unknown job kind {kind!r}")
    if run_batch is not None and batches_in_order:
        raise ValueError("a kind takes batches through run_batch or in order, not both")
    handler = JobHandler(
        kind=kind,
        run=run,
        run_batch=run_batch,
        batches_in_order=batches_in_order,
        immediate=immediate,
        on_not_queued=on_not_queued,
    )
    return _handlers.register(handler, replace=True)


def unregister(kind: str) -> None:
    """Forget the handler of `kind` (tests)."""
    _handlers.unregister(kind)


def handler_for(kind: str) -> JobHandler:
    """Return the handler registered for `kind`; LookupError if none is."""
    handler = _handlers.find(kind)
    if handler is None:
        raise LookupError(f"no handler is registered for job kind {kind!r} (its app registers it in AppConfig.ready())")
    return handler


def registered_kinds() -> list[str]:
    """Return the kinds that have a handler, in JobKind order."""
    return [handler.kind for handler in _handlers]


def claim_rules() -> ClaimRules:
    """Return what the claim step needs to know about the registered kinds."""
    return ClaimRules(
        batched=frozenset(h.kind for h in _handlers if h.batched),
        immediate=frozenset(h.kind for h in _handlers if h.immediate),
    )


def check_timelines(contexts: list[JobContext], save) -> dict[int, JobSkipped]:
    """`JobContext.check_timeline` for jobs of one save: one lock, one read of their rows.

    Return the JobSkipped of each job that may not write, by job id (the others may). A batch
    of embeddings checks all its turns in one transaction instead of one per job.
    """
    from studio.world.models import Save

    skipped: dict[int, JobSkipped] = {}
    with transaction.atomic():
        locked = Save.objects.select_for_update().only("timeline_generation", "current_turn").get(pk=save.pk)
        save.timeline_generation, save.current_turn = locked.timeline_generation, locked.current_turn
        rows = Job.objects.only("timeline_generation", "turn_id", "payload").in_bulk([ctx.job.pk for ctx in contexts])
        redone = []
        for ctx in contexts:
            row = rows.get(ctx.job.pk)
            try:
                if row is None:
                    raise JobSkipped("the job was deleted; nothing written")
                job_timeline_check(ctx.job, save, row)
            except JobSkipped as exc:
                skipped[ctx.job.pk] = exc
            except JobRedo:
                redone.append(ctx.job.pk)
        # Flagged to redo before anything was read: the flag is simply cleared.
        for row in Job.objects.select_for_update().filter(pk__in=redone):
            row.payload = {k: v for k, v in (row.payload or {}).items() if k != REDO_KEY}
            row.save(update_fields=["payload"])
    return skipped
