"""The job ledger: Job rows, their states, and every change of state.

The bottom layer of `studio.memory.jobs`. It knows the Job model and the rows a job is
scoped to (a Save, or a Universe for its own Lore Book), nothing of what a job does: the
handlers are registered by the apps (`registry`), run by the `runner`, and woken by the
`dispatch` module, which installs itself here with `set_waker` (this module imports none of
them).

States. QUEUED -> RUNNING -> DONE | SKIPPED | FAILED, with PAUSED (the spend guard; resumes
by itself), a QUEUED job waiting for its retry time (`payload["not_before"]`), and RUNNING
back to QUEUED when a rewind asks a job to run again (`JobRedo`, see `timeline`). A failed
attempt goes back to QUEUED with an exponential backoff (`AXIOM_JOB_RETRY_BACKOFF` x
2^(attempt-1)) until `AXIOM_JOB_MAX_ATTEMPTS` attempts were made, then FAILED; a
`PermanentJobError` (or an exception with `retryable = False`) fails at once. Every kind
follows these rules, the vector jobs of rewind and fork included. FAILED, SKIPPED and
PAUSED jobs can be put back in the queue by hand (`RETRYABLE_STATUSES`, `job_requeue`).

Claims (who runs a job, one runner per scope, crashed runners' jobs run again) are in
claims.py, which writes a job only through `owned_row` here.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from studio.memory.models import Job, JobKind, JobStatus

logger = logging.getLogger(__name__)

PENDING = (JobStatus.QUEUED, JobStatus.PAUSED)
UNFINISHED = (JobStatus.QUEUED, JobStatus.PAUSED, JobStatus.RUNNING)
# The statuses a person (Jobs page, API, admin) may put back in the queue.
RETRYABLE_STATUSES = (JobStatus.FAILED, JobStatus.SKIPPED, JobStatus.PAUSED)
# Living-memory work that must follow the turn order of a timeline.
ORDERED_KINDS = (JobKind.LIVING_TURN, JobKind.REFRESH_MODELS)
# Work on one turn's narrative: it belongs to that turn's Event (`timeline`), and ends
# skipped once the save is rewound before its turn (`registry.job_timeline_check`).
TURN_KINDS = (JobKind.EMBED_TURN, JobKind.LIVING_TURN)
# A claim's keys in a job's payload (removed when the claim ends).
CLAIM_KEYS = ("worker", "claimed_at")
# Set by a rewind on a running job that must run again (`timeline`); a new claim clears it.
REDO_KEY = "redo"


class JobSkipped(Exception):
    """The job has nothing to do (no LLM configured, timeline rewound, turn gone)."""


class JobPaused(Exception):
    """The job must wait until `resume_at` (the spend guard); nothing was written."""

    def __init__(self, reason: str, resume_at: datetime):
        super().__init__(reason)
        self.reason = reason
        self.resume_at = resume_at


class PermanentJobError(Exception):
    """A failure that running the job again will not fix (the job fails without retrying)."""


class JobRedo(Exception):
    """A rewind kept the job's turn but rolled back memory the job had read (`timeline`):
    nothing was written; the job goes back to the queue, its attempt not counted."""


class JobLost(Exception):
    """Another runner re-claimed this job (we were presumed dead): write nothing."""


# -- waking the dispatcher ---------------------------------------------------------------------

Waker = Callable[[int, float], None]
_waker: Waker | None = None


def set_waker(waker: Waker | None) -> None:
    """Install the function that hands a job id to a runner (`dispatch` does, on import)."""
    global _waker
    _waker = waker


def wake_on_commit(job_id: int, *, countdown: float = 0.0) -> None:
    """Hand `job_id` to a runner once the current transaction commits (after `countdown` s)."""

    def wake() -> None:
        if _waker is None:
            logger.warning("job %s is queued but no dispatcher is installed", job_id)
            return
        _waker(job_id, countdown)

    transaction.on_commit(wake)


# -- rows ------------------------------------------------------------------------------------


def job_create(*, wake: bool = True, **fields) -> Job:
    """Create a queued Job in the caller's transaction; wake a runner when it commits.

    `wake=False` is for a job its creator runs itself right after commit (`claim_one`).
    """
    job = Job.objects.create(**fields)
    if wake:
        wake_on_commit(job.pk)
    return job


def job_requeue(*, job: Job, wake: bool = True) -> tuple[Job, bool]:
    """Put a failed, skipped or paused job back in the queue (same row, attempts from zero).

    Return the row and whether it was requeued: queued, running and done jobs are left as
    they are (a done job's results stand).
    """
    with transaction.atomic():
        row = Job.objects.select_for_update().get(pk=job.pk)
        if row.status not in RETRYABLE_STATUSES:
            return row, False
        payload = dict(row.payload or {})
        for key in ("not_before", *CLAIM_KEYS):
            payload.pop(key, None)
        row.payload = payload
        row.status = JobStatus.QUEUED
        row.error = ""
        row.progress = "queued (retry)"
        row.finished_at = None
        row.attempts = 0
        row.save(update_fields=["payload", "status", "error", "progress", "finished_at", "attempts"])
        if wake:
            wake_on_commit(row.pk)
    return row, True


def owned_row(job_id: int, worker: str) -> Job | None:
    """Lock and return the job's row if it is still RUNNING under `worker` (else None).

    Call inside the transaction that writes the job's results: a holder presumed dead and
    re-claimed by another runner must write nothing.
    """
    row = Job.objects.select_for_update().filter(pk=job_id).first()
    if row is None or row.status != JobStatus.RUNNING or (row.payload or {}).get("worker") != worker:
        return None
    return row


# -- ends of an attempt ----------------------------------------------------------------------

CLOSE_FIELDS = ["payload", "status", "progress", "error", "result", "finished_at"]


def close_row(row: Job, status: str, *, progress: str, error: str = "", result: dict | None = None, now=None) -> None:
    """Set a claimed job's final state in memory (the caller saves it)."""
    payload = dict(row.payload or {})
    for key in CLAIM_KEYS:
        payload.pop(key, None)
    row.payload = payload
    row.status = status
    row.progress = progress[:200]
    row.error = error
    if result is not None:
        row.result = result
    row.finished_at = now or timezone.now()


def mark_finished(row: Job, status: str, *, progress: str, error: str = "", result: dict | None = None) -> None:
    """Close a claimed job (call inside the transaction that holds its row)."""
    close_row(row, status, progress=progress, error=error, result=result)
    row.save(update_fields=CLOSE_FIELDS)


def finish(job: Job, worker: str, status: str, *, progress: str, error: str, result: dict | None = None) -> bool:
    """Close `job` if `worker` still holds it; return whether it did."""
    with transaction.atomic():
        row = owned_row(job.pk, worker)
        if row is None:
            return False
        mark_finished(row, status, progress=progress, error=error, result=result)
    return True


def close_batch(batch: list[Job], worker: str, outcomes: dict[int, tuple[str, dict]]) -> None:
    """Close every job of a batch still held by `worker`, in one transaction.

    `outcomes` maps a job id to (status, {"progress", "result"?, "error"?}).
    """
    with transaction.atomic():
        rows = {
            row.pk: row
            for row in Job.objects.select_for_update().filter(pk__in=[j.pk for j in batch], status=JobStatus.RUNNING)
            if (row.payload or {}).get("worker") == worker
        }
        closed = []
        now = timezone.now()
        for job in batch:
            row = rows.get(job.pk)
            if row is None or job.pk not in outcomes:
                continue
            status, detail = outcomes[job.pk]
            close_row(row, status, now=now, **detail)
            closed.append(row)
        if closed:
            Job.objects.bulk_update(closed, CLOSE_FIELDS)


def defer(job: Job, worker: str, when: datetime, *, status: str, progress: str, error: str) -> bool:
    """Release `job` until `when` (a retry's backoff, or PAUSED); wake a runner then."""
    with transaction.atomic():
        row = owned_row(job.pk, worker)
        if row is None:
            return False
        payload = dict(row.payload or {})
        for key in CLAIM_KEYS:
            payload.pop(key, None)
        payload["not_before"] = when.isoformat()
        row.payload = payload
        row.status = status
        row.progress = progress[:200]
        row.error = error
        row.save(update_fields=["payload", "status", "progress", "error"])
        countdown = max(0.0, (when - timezone.now()).total_seconds())
        wake_on_commit(row.pk, countdown=countdown + 0.05)
    return True


def requeue_for_redo(job: Job, worker: str, reason: str) -> bool:
    """Put a job that raised JobRedo back in the queue (attempt not counted); wake a runner."""
    with transaction.atomic():
        row = owned_row(job.pk, worker)
        if row is None:
            return False
        row.payload = {k: v for k, v in (row.payload or {}).items() if k not in (*CLAIM_KEYS, REDO_KEY, "not_before")}
        row.status = JobStatus.QUEUED
        row.attempts = max(0, row.attempts - 1)
        row.progress = f"queued again: {reason}"[:200]
        row.error = ""
        row.save(update_fields=["payload", "status", "attempts", "progress", "error"])
        wake_on_commit(row.pk)
    return True


def retry_delay(attempts: int) -> float:
    """Seconds before the next attempt after `attempts` failed ones (exponential backoff)."""
    return settings.AXIOM_JOB_RETRY_BACKOFF * (2 ** (max(1, attempts) - 1))


def record_failure(job: Job, worker: str, exc: BaseException) -> str:
    """Record a failed attempt: back to QUEUED with backoff, or FAILED once out of attempts.

    Return the status the job now has.
    """
    message = f"{exc.__class__.__name__}: {exc}"
    logger.warning("job %s (%s) failed: %s", job.pk, job.kind, message)
    detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=6))
    permanent = isinstance(exc, PermanentJobError) or getattr(exc, "retryable", True) is False
    if not permanent and job.attempts < settings.AXIOM_JOB_MAX_ATTEMPTS:
        wait = retry_delay(job.attempts)
        defer(
            job,
            worker,
            timezone.now() + timedelta(seconds=wait),
            status=JobStatus.QUEUED,
            progress=f"retrying in {wait:g}s (attempt {job.attempts} failed)",
            error=message,
        )
        return JobStatus.QUEUED
    finish(job, worker, JobStatus.FAILED, progress="failed", error=f"{message}\n\n{detail}")
    return JobStatus.FAILED
