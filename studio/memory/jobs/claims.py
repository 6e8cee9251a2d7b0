"""Claims: which runner works on which jobs, one runner per scope, and runners that died.

Claims. Every job belongs to a scope, and at most one runner works in a scope at a time: a
runner *claims* the oldest eligible job of the scope (with up to N more of the same kind:
a batch) in a transaction that locks the scope row (`select_for_update`; on SQLite the
IMMEDIATE write lock does the same), and keeps draining the scope until nothing is
eligible. A runner that finds the scope busy returns at once: the busy runner will reach
its job. Living-memory work (`ORDERED_KINDS`) is taken in turn order, and a living job
waits while an earlier turn's living job of the same timeline is queued, deferred, paused
or failed. Kinds a caller runs at once (`ClaimRules.immediate`: the rewind's vector delete,
the fork's vector copy) are claimed one by one with `claim_one`, beside the scope's runner,
and never make the scope busy.

Crashes. A claimed job records its runner (host|pid|thread) and claim time. A runner that
dies leaves its jobs RUNNING; the next claim in that scope sees the dead holder (same host
and no such process or thread, or a claim older than the hard time limit) and re-queues
them. A holder only writes while the row is still RUNNING under its name (`owned_row`), so
a runner presumed dead that wakes up writes nothing (`JobLost`).

The states a claim moves a job between, and the rows' other changes, are ledger.py's; this
module imports it (the ledger imports nothing of this one).
"""

from __future__ import annotations

import os
import socket
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from studio.memory.jobs.ledger import CLAIM_KEYS, ORDERED_KINDS, PENDING, REDO_KEY, UNFINISHED, owned_row
from studio.memory.models import Job, JobKind, JobStatus


@dataclass(frozen=True)
class ClaimRules:
    """What the registered handlers declare about their kinds, for the claim step."""

    # Kinds claimed several at a time (the handler takes batches).
    batched: frozenset[str] = frozenset()
    # Kinds a caller runs at once (`claim_one`); they never hold their scope.
    immediate: frozenset[str] = frozenset()


# -- runners and their liveness ----------------------------------------------------------------


def worker_identity() -> str:
    """Return this thread's runner name: host|pid|thread."""
    return f"{socket.gethostname()}|{os.getpid()}|{threading.get_ident()}"


def _timestamp(value) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return None


def not_before(job: Job) -> datetime | None:
    """Return when a deferred job may run again (None: now)."""
    return _timestamp((job.payload or {}).get("not_before"))


def _claimed_at(job: Job) -> datetime | None:
    return _timestamp((job.payload or {}).get("claimed_at")) or job.started_at


def _holder_alive(job: Job, now: datetime) -> bool:
    worker = (job.payload or {}).get("worker", "")
    limit = int(getattr(settings, "CELERY_TASK_TIME_LIMIT", 300) or 300) + 60
    claimed_at = _claimed_at(job)
    if claimed_at and claimed_at < now - timedelta(seconds=limit):
        return False
    try:
        host, pid_text, thread_text = worker.split("|")
        pid, thread_ident = int(pid_text), int(thread_text)
    except ValueError:
        return True  # unknown holder: trust it until the time limit passes
    if host != socket.gethostname():
        return True
    if pid == os.getpid():
        return thread_ident in {t.ident for t in threading.enumerate()}
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _workers_alive(running: list[Job], now: datetime) -> dict[str, bool]:
    """Liveness per runner, judged on its most recently claimed job (a batch's jobs share one
    runner; the claim time of the job it is working on is refreshed as it goes)."""
    latest: dict[str, Job] = {}
    for job in running:
        worker = (job.payload or {}).get("worker", "")
        current = latest.get(worker)
        if current is None or (_claimed_at(job) or now) > (_claimed_at(current) or now):
            latest[worker] = job
    return {worker: _holder_alive(job, now) for worker, job in latest.items()}


def _requeue_lost(job: Job) -> None:
    payload = dict(job.payload or {})
    payload.pop("worker", None)
    job.payload = payload
    job.status = JobStatus.QUEUED
    job.progress = "runner lost (worker killed or timed out); running again"
    job.save(update_fields=["payload", "status", "progress"])


# -- scopes and claims -------------------------------------------------------------------------


def _scope_filter(job: Job) -> Q:
    if job.game_save_id is not None:
        return Q(game_save_id=job.game_save_id)
    return Q(universe_id=job.universe_id, game_save__isnull=True)


def _lock_scope(job: Job):
    from studio.world.models import Save, Universe

    if job.game_save_id is not None:
        return Save.objects.select_for_update().filter(pk=job.game_save_id).first()
    return Universe.objects.select_for_update().filter(pk=job.universe_id).first()


def _mark_claimed(batch: list[Job], worker: str, now: datetime, *, ordered: bool) -> None:
    """Set the claimed jobs RUNNING under `worker` (in memory; the caller saves them)."""
    chosen = batch[0]
    for job in batch:
        payload = dict(job.payload or {})
        payload["worker"] = worker
        payload["claimed_at"] = now.isoformat()
        payload.pop("not_before", None)
        payload.pop(REDO_KEY, None)
        if job.started_at is not None:
            payload["rerun"] = True  # an earlier attempt may have written (handlers replace)
        if len(batch) > 1:
            payload["batch"] = len(batch)
        else:
            payload.pop("batch", None)
        job.payload = payload
        job.status = JobStatus.RUNNING
        job.attempts += 1
        if job is chosen or not ordered:
            job.started_at = job.started_at or now  # later turns of a living batch: when their turn comes
        job.finished_at = None
        job.progress = "running" if job is chosen else f"claimed with turn {chosen.turn_id} (batch of {len(batch)})"


CLAIM_FIELDS = ["payload", "status", "attempts", "started_at", "finished_at", "progress"]


def claim_one(job_id: int, worker: str, *, take_failed: bool = False) -> Job | None:
    """Claim `job_id` itself for `worker`, now, beside whatever its scope's runner is doing.

    For the kinds a caller runs at once. A queued or paused job is taken even if its retry
    time has not come (the caller runs it now); with `take_failed`, a failed one too (the
    caller finishes pending work). A job RUNNING under a live runner, or finished, is left
    alone: None. The scope row is locked first, as in `claim_batch`, so the two never take
    the same job.
    """
    now = timezone.now()
    with transaction.atomic():
        seed = Job.objects.filter(pk=job_id).first()
        if seed is None or _lock_scope(seed) is None:
            return None
        job = Job.objects.select_for_update().get(pk=job_id)
        if job.status == JobStatus.RUNNING:
            if (job.payload or {}).get("worker") == worker or _holder_alive(job, now):
                return None
        elif job.status not in PENDING and not (take_failed and job.status == JobStatus.FAILED):
            return None
        _mark_claimed([job], worker, now, ordered=False)
        job.save(update_fields=CLAIM_FIELDS)
        return job


def claim_batch(seed: Job, worker: str, *, limit: int = 1, rules: ClaimRules = ClaimRules()) -> list[Job]:
    """Claim the next eligible job in `seed`'s scope for `worker`, with up to `limit` - 1
    more of the same kind right behind it; [] if the scope is busy or idle.

    A batch is jobs of a kind in `rules.batched` (EMBED_TURN: embedded with one model call;
    LIVING_TURN: consecutive turns in turn order, run one by one); all of the save's current
    timeline generation, due now, and not held back by an earlier failed, paused or
    deferred turn.
    """
    now = timezone.now()
    with transaction.atomic():
        scope_row = _lock_scope(seed)
        if scope_row is None:
            return []
        scope_jobs = Job.objects.filter(_scope_filter(seed))
        unfinished = list(scope_jobs.filter(status__in=UNFINISHED))
        running_jobs = [j for j in unfinished if j.status == JobStatus.RUNNING]
        alive = _workers_alive(running_jobs, now)
        for running in running_jobs:
            holder = (running.payload or {}).get("worker", "")
            if holder == worker or alive.get(holder, True):
                if running.kind in rules.immediate:
                    continue  # run beside the scope's runner: not a reason to wait
                return []
            _requeue_lost(running)
        candidates = [j for j in unfinished if j.status in PENDING]
        if not candidates:
            return []
        current_turn = getattr(scope_row, "current_turn", None)
        generation = getattr(scope_row, "timeline_generation", None)
        # Earliest turn of this timeline whose living work failed: later turns wait for it.
        blocked_from = None
        blocked_why = ""
        if seed.game_save_id is not None and any(j.kind in ORDERED_KINDS for j in candidates):
            failed = (
                scope_jobs.filter(
                    kind=JobKind.LIVING_TURN,
                    status=JobStatus.FAILED,
                    timeline_generation=generation,
                    turn_id__lte=current_turn,
                )
                .order_by("turn_id")
                .values_list("turn_id", "id")
                .first()
            )
            if failed is not None:
                blocked_from = failed
                blocked_why = f"waiting: turn {failed[0]} failed and must be processed first (retry it)"
        candidates.sort(key=lambda j: (j.kind in ORDERED_KINDS, j.turn_id or 0, j.id))
        chosen = None
        chosen_index = 0
        for chosen_index, job in enumerate(candidates):  # noqa: B007 - read after the loop
            ordered = job.kind in ORDERED_KINDS and job.timeline_generation == generation
            if ordered and blocked_from is not None and (job.turn_id or 0, job.id) > blocked_from:
                if job.progress != blocked_why:
                    Job.objects.filter(pk=job.pk).update(progress=blocked_why[:200])
                continue
            due = not_before(job)
            if job.status == JobStatus.PAUSED or (due is not None and due > now):
                if due is None or due > now:
                    if ordered and blocked_from is None:
                        blocked_from = (job.turn_id or 0, job.id)
                        state = "paused" if job.status == JobStatus.PAUSED else "waiting to retry"
                        blocked_why = f"waiting: turn {job.turn_id} is {state} and must be processed first"
                    continue
            chosen = job
            break
        if chosen is None:
            return []
        batch = [chosen]
        ordered = chosen.kind in ORDERED_KINDS
        if limit > 1 and chosen.kind in rules.batched and chosen.timeline_generation == generation:
            for job in candidates[chosen_index + 1 :]:
                if len(batch) >= limit:
                    break
                fits = (
                    job.kind == chosen.kind
                    and job.status == JobStatus.QUEUED
                    and job.timeline_generation == generation
                    and not ((not_before(job) or now) > now)
                    and (job.turn_id or 0) <= (current_turn or 0)
                )
                if ordered and blocked_from is not None and (job.turn_id or 0, job.id) > blocked_from:
                    fits = False
                if not fits:
                    if ordered:
                        break  # consecutive turns only: the rest waits for the next claim
                    continue
                batch.append(job)
        _mark_claimed(batch, worker, now, ordered=ordered)
        if len(batch) == 1:
            chosen.save(update_fields=CLAIM_FIELDS)
        else:
            Job.objects.bulk_update(batch, CLAIM_FIELDS)
        return batch


def touch_claim(job: Job, worker: str) -> bool:
    """Refresh the claim time of a batched job as its turn comes (the holder is working)."""
    with transaction.atomic():
        row = owned_row(job.pk, worker)
        if row is None:
            return False
        payload = dict(row.payload or {})
        now = timezone.now()
        payload["claimed_at"] = now.isoformat()
        row.payload = payload
        row.progress = "running"
        row.started_at = row.started_at or now
        row.save(update_fields=["payload", "progress", "started_at"])
        job.payload = payload
        job.started_at = row.started_at
    return True


def release(jobs: list[Job], worker: str) -> None:
    """Put claimed, unstarted jobs of a batch back in the queue (their attempt not counted)."""
    if not jobs:
        return
    with transaction.atomic():
        rows = [
            row
            for row in Job.objects.select_for_update().filter(pk__in=[j.pk for j in jobs], status=JobStatus.RUNNING)
            if (row.payload or {}).get("worker") == worker
        ]
        for row in rows:
            payload = dict(row.payload or {})
            for key in (*CLAIM_KEYS, "batch"):
                payload.pop(key, None)
            row.payload = payload
            row.status = JobStatus.QUEUED
            row.attempts = max(0, row.attempts - 1)
            row.progress = "queued"
        if rows:
            Job.objects.bulk_update(rows, ["payload", "status", "attempts", "progress"])
