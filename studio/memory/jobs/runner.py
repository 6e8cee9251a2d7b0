"""The runner: claim work through the ledger, run it with the registered handler, record it.

`run_job(job_id)` drains the job's scope: it claims the next eligible job (or batch) of the
scope, runs it, and loops until nothing is eligible; a busy scope returns at once (its
runner will reach the job). Whatever a handler does ends in the ledger: DONE with its
result, SKIPPED, PAUSED, or a failed attempt retried with backoff (`ledger.record_failure`).

`run_now(job_id)` runs one job of an `immediate` kind here and now, beside the scope's
runner (a rewind's vector delete right after its commit, a retry from the Jobs page, a turn
append finishing a failed delete first), through the same claim and the same records, and
returns how it ended.

A job a rewind flagged to redo (`JobRedo`: its turn was kept, memory it read was
rolled back) goes back to the queue with its attempt not counted, and the drain loop takes
it again.

Batches: a kind registered with `run_batch` gets the whole claimed batch in one call (one
model call for several turns' embeddings); if that call fails as a whole, the jobs run again
one by one, so one bad turn costs only its own job an attempt. A kind registered with
`batches_in_order` has its batch run job by job in turn order, sharing per-save lookups; a
job that does not end done or skipped releases the rest of the batch unrun.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings

from studio.memory.jobs import claims, ledger, registry
from studio.memory.jobs.ledger import JobLost, JobPaused, JobRedo, JobSkipped, PermanentJobError
from studio.memory.jobs.registry import JobContext
from studio.memory.models import Job, JobStatus

logger = logging.getLogger(__name__)

LOST = "lost"

_local = threading.local()


@dataclass
class Outcome:
    """How one run of a job ended: a JobStatus (or LOST), its result or its error."""

    status: str
    result: dict = field(default_factory=dict)
    error: str = ""
    ran: bool = True


def inside_runner() -> bool:
    """True while this thread is running jobs (an eager send then leaves them to the drain loop)."""
    return getattr(_local, "running", False)


def batch_size() -> int:
    return max(1, int(getattr(settings, "AXIOM_JOB_BATCH_SIZE", 16) or 1))


def claim_batch(seed: Job, worker: str, *, limit: int = 1) -> list[Job]:
    """Claim the next eligible job (or batch) in `seed`'s scope under the registered rules."""
    return claims.claim_batch(seed, worker, limit=limit, rules=registry.claim_rules())


def run_job(job_id: int) -> None:
    """Run `job_id` (and whatever else is due in its scope) unless another runner holds it."""
    seed = Job.objects.filter(pk=job_id).first()
    if seed is None or seed.status not in ledger.UNFINISHED:
        return
    worker = claims.worker_identity()
    limit = batch_size()
    previous = inside_runner()
    _local.running = True
    try:
        while True:
            batch = claim_batch(seed, worker, limit=limit)
            if not batch:
                return
            if len(batch) == 1:
                _execute(batch[0], worker)
                continue
            handler = registry.handler_for(batch[0].kind)
            if handler.run_batch is not None:
                _execute_batch(handler, batch, worker)
            else:
                _execute_in_order(batch, worker)
    finally:
        _local.running = previous


def not_queued(job: Job, error: str) -> None:
    """`job` could not be handed to a runner: call its kind's `on_not_queued` hook, if any."""
    try:
        handler = registry.handler_for(job.kind)
    except LookupError:
        return
    if handler.on_not_queued is not None:
        handler.on_not_queued(job, error)


def run_now(job_id: int, *, vectors: Callable[[], object] | None = None, take_failed: bool = False) -> Outcome:
    """Claim `job_id` itself and run it in this thread; return how it ended.

    `vectors` provides the vector store (default: the configured one). With `take_failed`
    a FAILED job is run again too, its attempts counted on. A job another live runner holds
    or that is already finished is not run (`ran` False, `status` its current one).
    """
    worker = claims.worker_identity()
    job = claims.claim_one(job_id, worker, take_failed=take_failed)
    if job is None:
        status = Job.objects.filter(pk=job_id).values_list("status", flat=True).first() or "missing"
        why = "another runner is running it now" if status == JobStatus.RUNNING else f"it is {status}"
        return Outcome(status=status, error=f"job {job_id} was not run: {why}", ran=False)
    previous = inside_runner()
    _local.running = True
    try:
        return _execute(job, worker, vectors=vectors)
    finally:
        _local.running = previous


def _execute(job: Job, worker: str, *, shared: dict | None = None, vectors=None) -> Outcome:
    """Run one claimed job with its kind's handler and record how it ended."""
    try:
        handler = registry.handler_for(job.kind)
    except LookupError as exc:
        status = ledger.record_failure(job, worker, PermanentJobError(str(exc)))
        return Outcome(status=status, error=str(exc))
    context = JobContext(job=job, worker=worker, shared=shared if shared is not None else {}, vector_provider=vectors)
    try:
        result = handler.run(context)
    except JobLost:
        logger.warning("job %s was re-claimed by another runner; dropping this run", job.pk)
        return Outcome(status=LOST, error="re-claimed by another runner")
    except JobSkipped as exc:
        ledger.finish(job, worker, JobStatus.SKIPPED, progress=f"skipped: {exc}", error="")
        return Outcome(status=JobStatus.SKIPPED, error=str(exc))
    except JobRedo as exc:
        # A rewind kept the job's turn but rolled back memory it had read: run it again.
        ledger.requeue_for_redo(job, worker, str(exc))
        return Outcome(status=JobStatus.QUEUED, error=str(exc))
    except JobPaused as exc:
        ledger.defer(
            job, worker, exc.resume_at, status=JobStatus.PAUSED, progress=f"paused: {exc.reason}", error=exc.reason
        )
        return Outcome(status=JobStatus.PAUSED, error=exc.reason)
    except Exception as exc:  # noqa: BLE001 - every failure is recorded on the job
        status = ledger.record_failure(job, worker, exc)
        return Outcome(status=status, error=f"{exc.__class__.__name__}: {exc}")
    if result is not None:
        # Handlers that write to the database mark the job done inside their own transaction
        # (`JobContext.commit`); the others (vector-only work) return their result here.
        ledger.finish(job, worker, JobStatus.DONE, progress="done", error="", result=result)
    return Outcome(status=JobStatus.DONE, result=result if result is not None else (context.result or {}))


def _execute_in_order(batch: list[Job], worker: str) -> None:
    """Run a batch one by one in turn order, sharing per-save lookups.

    Each job makes its own calls and commits its own writes (the next turn's consolidation
    reads them). A job that does not end done or skipped (failed, deferred, paused, lost)
    releases the rest of the batch unrun: they go back to the queue, where the claim holds
    them behind the turn that did not go through.
    """
    shared: dict = {"batch_turns": [job.turn_id for job in batch]}
    for index, job in enumerate(batch):
        if index and not claims.touch_claim(job, worker):
            claims.release(batch[index:], worker)
            return
        outcome = _execute(job, worker, shared=shared)
        if outcome.status not in (JobStatus.DONE, JobStatus.SKIPPED):
            claims.release(batch[index + 1 :], worker)
            return


def _execute_batch(handler: registry.JobHandler, batch: list[Job], worker: str) -> None:
    """Run a batch with the handler's `run_batch`, then close every job in one transaction.

    If the batch fails as a whole, its jobs run again one by one, so one bad job (or a
    passing fault) costs only its own job an attempt.
    """
    contexts = [JobContext(job=job, worker=worker) for job in batch]
    try:
        outcomes = handler.run_batch(contexts)
    except JobLost:
        logger.warning("batch %s was re-claimed by another runner", [j.pk for j in batch])
        return
    except Exception as exc:  # noqa: BLE001 - fall back to one job at a time
        logger.warning(
            "batch of %s %s jobs failed (%s: %s); running them one by one",
            len(batch),
            handler.kind,
            exc.__class__.__name__,
            exc,
        )
        for job in batch:
            if claims.touch_claim(job, worker):
                _execute(job, worker)
        return
    ledger.close_batch(batch, worker, outcomes)
