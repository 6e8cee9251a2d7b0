"""Background jobs: tracking (the Job rows), dispatch, and the per-scope runner.

Enqueueing (`enqueue_*`) creates Job rows in the caller's transaction and hands them to a
runner through `transaction.on_commit`, so a job never runs before the rows it reads exist
and a rolled-back request leaves no job behind. The runner is

- Celery on Redis when `settings.REDIS_URL` is set (`studio.memory.tasks.run_job_task`);
- otherwise a small in-process thread pool (`AXIOM_INPROCESS_WORKERS` threads), so a
  request never waits for embeddings or an LLM;
- inline at commit time when `AXIOM_JOBS_EAGER` is on (tests, scripts).

Ordering. Every job belongs to a scope: a save (turn embedding, living pipeline, the save's
lore, model refresh) or a universe (its own Lore Book). At most one
job per scope runs at a time: a runner *claims* the oldest eligible job of the scope in a
transaction that locks the scope row (`select_for_update`; on SQLite the IMMEDIATE write
lock does the same), and keeps draining the scope until nothing is eligible. A runner that
finds the scope busy returns at once: the busy runner will reach its job. Living-memory
jobs are taken in turn order, and a living job waits while an earlier turn's living job
of the same timeline is queued, deferred, paused or failed, so turn 12 is never
consolidated before turn 11 (retrying the failed turn releases the ones behind it).

Crashes. A claimed job records its runner (host, pid, thread). A runner that dies (killed
worker, hard time limit) leaves the job RUNNING; the next claim on that scope sees the
dead holder (same host and no such process or thread, or older than the hard time limit)
and re-queues the job. Celery redelivers the message of a killed worker child
(`acks_late` + `reject_on_worker_lost`). Because every job writes its results and its DONE
status in one transaction, a re-run never duplicates anything.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

from django.conf import settings
from django.db import close_old_connections, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from studio.memory.models import Job, JobKind, JobStatus

logger = logging.getLogger(__name__)

PENDING = (JobStatus.QUEUED, JobStatus.PAUSED)
ACTIVE = (JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.PAUSED)
# The kinds this runner executes. VECTOR_ROLLBACK and FORK_VECTORS jobs are run by
# `studio.saves.checkpoints.CheckpointManager` itself and never block this runner.
RUNNER_KINDS = (JobKind.SYNC_LORE, JobKind.EMBED_TURN, JobKind.LIVING_TURN, JobKind.REFRESH_MODELS)
# Living-memory work that must follow the turn order of a timeline.
ORDERED_KINDS = (JobKind.LIVING_TURN, JobKind.REFRESH_MODELS)
# Kinds a runner claims several of at once (see `claim_batch`).
BATCH_KINDS = (JobKind.EMBED_TURN, JobKind.LIVING_TURN)
QUEUE_DOWN_PREFIX = "Could not reach the job queue"


class JobSkipped(Exception):
    """The job has nothing to do (no LLM configured, timeline rewound, turn gone)."""


class JobPaused(Exception):
    def __init__(self, reason: str, resume_at: datetime):
        super().__init__(reason)
        self.reason = reason
        self.resume_at = resume_at


class PermanentJobError(Exception):
    """A failure that running the job again will not fix (the job fails without retrying)."""


class JobLost(Exception):
    """Another runner re-claimed this job (we were presumed dead): write nothing."""


# -- enqueueing ------------------------------------------------------------------------------


def _create_job(**fields) -> Job:
    job = Job.objects.create(**fields)
    dispatch(job)
    return job


def enqueue_sync_lore(*, universe=None, game_save=None) -> Job:
    """Queue a re-embedding of a Lore Book and return its job.

    With `universe`: embed the universe's own Lore Book under `universe.lore_scope_id`, then
    re-sync the lore of each of its saves (one save-scoped job each, queued when this one
    runs). With `game_save`: that save's lore only. For a universe, the entries'
    `embedding_state` goes to pending now and to embedded or failed when the job ends. A sync already queued and not
    started for the same scope is reused instead of queueing another.
    """
    from studio.universes.models import EmbeddingState, LoreEntry

    if (universe is None) == (game_save is None):
        raise ValueError("pass exactly one of universe= or game_save=")
    if universe is not None:
        scope = {"universe": universe, "game_save": None}
        universe_id = universe.pk
    else:
        scope = {"universe_id": game_save.universe_id, "game_save": game_save}
        universe_id = game_save.universe_id
    if universe is not None:
        # The entries' state tracks the universe's own Lore Book embedding.
        LoreEntry.objects.filter(universe_id=universe_id).exclude(embedding_state=EmbeddingState.PENDING).update(
            embedding_state=EmbeddingState.PENDING
        )
    existing = (
        Job.objects.filter(kind=JobKind.SYNC_LORE, status=JobStatus.QUEUED, started_at__isnull=True, **scope)
        .order_by("id")
        .first()
    )
    if existing is not None:
        return existing
    generation = game_save.timeline_generation if game_save is not None else 0
    return _create_job(kind=JobKind.SYNC_LORE, timeline_generation=generation, progress="queued", **scope)


def enqueue_turn(*, game_save, turn_id: int, reextract: bool = False) -> list[Job]:
    """Queue the work for a new (or edited) turn and return the jobs.

    Always an EMBED_TURN job (the narrative into the vector store); in living mode also a
    LIVING_TURN job (extract -> facts -> consolidate -> beliefs -> reflect -> mental models).
    `reextract` marks an edited turn: its living job first removes what the old narrative
    produced, and older living jobs still waiting for that turn are superseded.
    """
    generation = game_save.timeline_generation
    jobs = [
        _create_job(
            kind=JobKind.EMBED_TURN,
            universe_id=game_save.universe_id,
            game_save=game_save,
            turn_id=turn_id,
            timeline_generation=generation,
            payload={"replace": True} if reextract else {},
            progress="queued",
        )
    ]
    if game_save.is_living:
        if reextract:
            Job.objects.filter(
                game_save=game_save,
                kind=JobKind.LIVING_TURN,
                turn_id=turn_id,
                status__in=(JobStatus.QUEUED, JobStatus.PAUSED, JobStatus.FAILED),
            ).update(status=JobStatus.SKIPPED, progress="superseded by a newer edit of this turn", finished_at=timezone.now())
        jobs.append(
            _create_job(
                kind=JobKind.LIVING_TURN,
                universe_id=game_save.universe_id,
                game_save=game_save,
                turn_id=turn_id,
                timeline_generation=generation,
                payload={"reextract": True} if reextract else {},
                progress="queued",
            )
        )
    return jobs


def enqueue_refresh_models(*, game_save) -> Job:
    """Queue a refresh of the save's stale mental models (after a rewind)."""
    return _create_job(
        kind=JobKind.REFRESH_MODELS,
        universe_id=game_save.universe_id,
        game_save=game_save,
        turn_id=game_save.current_turn,
        timeline_generation=game_save.timeline_generation,
        progress="queued",
    )


def job_retry(*, job: Job) -> Job:
    """Put a failed, skipped or paused job back in the queue (same row) and return it.

    Queued, running and done jobs are returned unchanged (a done job's results stand; edit
    the turn to re-extract it). A rewind's vector delete or a fork's vector copy is not run
    by the runner: retrying one runs it now, through the checkpoint manager.
    """
    if job.kind in (JobKind.VECTOR_ROLLBACK, JobKind.FORK_VECTORS):
        return _retry_checkpoint_job(job)
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if job.status in (JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.DONE):
            return job
        payload = dict(job.payload or {})
        payload.pop("not_before", None)
        payload.pop("worker", None)
        job.payload = payload
        job.status = JobStatus.QUEUED
        job.error = ""
        job.progress = "queued (retry)"
        job.finished_at = None
        job.attempts = 0
        job.save(update_fields=["payload", "status", "error", "progress", "finished_at", "attempts"])
        dispatch(job)
    return job


def _retry_checkpoint_job(job: Job) -> Job:
    from studio.saves.checkpoints import CheckpointManager

    if job.status != JobStatus.DONE and job.game_save_id is not None:
        manager = CheckpointManager()
        if job.kind == JobKind.VECTOR_ROLLBACK:
            manager.finish_vector_rollback(job.game_save)
        else:
            manager.finish_fork_vectors(job.game_save)
    job.refresh_from_db()
    return job


def jobs_for_save(*, game_save) -> QuerySet[Job]:
    """Return a save's jobs, newest first."""
    return Job.objects.filter(game_save=game_save).order_by("-created_at", "-id")


def jobs_active_for_save(*, game_save) -> bool:
    return Job.objects.filter(game_save=game_save, status__in=(JobStatus.QUEUED, JobStatus.RUNNING)).exists()


# -- dispatch --------------------------------------------------------------------------------

_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()
_local = threading.local()


def dispatch(job: Job, *, countdown: float = 0) -> None:
    """Hand `job` to the runner once the current transaction commits."""
    job_id = job.pk
    transaction.on_commit(lambda: send(job_id, countdown=countdown))


def send(job_id: int, *, countdown: float = 0) -> None:
    """Start running `job_id` now (or after `countdown` seconds) on the configured runner."""
    if getattr(settings, "AXIOM_JOBS_EAGER", False):
        # Inside a runner the drain loop reaches the job by itself once it is due.
        if getattr(_local, "running", False) or countdown > 0:
            return
        run_job(job_id)
        return
    if settings.REDIS_URL:
        _send_celery(job_id, countdown)
        return
    executor = _get_executor()
    if countdown > 0:
        timer = threading.Timer(countdown, lambda: executor.submit(_run_in_thread, job_id))
        timer.daemon = True
        timer.start()
    else:
        executor.submit(_run_in_thread, job_id)


def _send_celery(job_id: int, countdown: float) -> None:
    from studio.celery import app
    from studio.memory.tasks import run_job_task

    try:
        with app.connection_for_write(url=settings.REDIS_URL, connect_timeout=3) as connection:
            result = run_job_task.apply_async(
                args=[job_id],
                countdown=countdown or None,
                queue=settings.AXIOM_JOB_QUEUE,
                connection=connection,
                retry=True,
                retry_policy={"max_retries": 2, "interval_start": 0.2, "interval_step": 0.3, "interval_max": 1},
            )
    except Exception as exc:  # the broker is down: the work is kept (rows committed), the job says why
        logger.warning("could not enqueue job %s: %s", job_id, exc)
        error = (
            f"{QUEUE_DOWN_PREFIX} (Redis at {settings.REDIS_URL}): {exc.__class__.__name__}: {exc}. "
            "Nothing was lost: retry this job once the queue is back."
        )
        Job.objects.filter(pk=job_id, status__in=PENDING).update(
            status=JobStatus.FAILED, error=error, progress="not queued", finished_at=timezone.now()
        )
        job = Job.objects.filter(pk=job_id, kind=JobKind.SYNC_LORE, game_save__isnull=True).first()
        if job is not None:  # the Lore Book must not look "pending" forever
            from studio.universes.models import EmbeddingState, LoreEntry

            LoreEntry.objects.filter(universe_id=job.universe_id, embedding_state=EmbeddingState.PENDING).update(
                embedding_state=EmbeddingState.FAILED, embedding_error=error[:2000]
            )
        return
    Job.objects.filter(pk=job_id).update(task_id=str(result.id)[:64])


def _get_executor() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(
                max_workers=max(1, settings.AXIOM_INPROCESS_WORKERS), thread_name_prefix="axiom-job"
            )
        return _executor


def _run_in_thread(job_id: int) -> None:
    close_old_connections()
    try:
        run_job(job_id)
    except Exception:
        logger.exception("job %s crashed the in-process runner", job_id)
    finally:
        close_old_connections()


def shutdown_inprocess_runner(wait: bool = True) -> None:
    """Stop the in-process pool (tests, benchmarks); queued work still in it finishes first."""
    global _executor
    with _executor_lock:
        executor, _executor = _executor, None
    if executor is not None:
        executor.shutdown(wait=wait)


# -- the runner ------------------------------------------------------------------------------


def worker_identity() -> str:
    return f"{socket.gethostname()}|{os.getpid()}|{threading.get_ident()}"


def _holder_alive(job: Job, now: datetime) -> bool:
    worker = (job.payload or {}).get("worker", "")
    limit = int(getattr(settings, "CELERY_TASK_TIME_LIMIT", 300) or 300) + 60
    claimed_at = _timestamp((job.payload or {}).get("claimed_at")) or job.started_at
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


def _scope_filter(job: Job) -> Q:
    kinds = Q(kind__in=RUNNER_KINDS)
    if job.game_save_id is not None:
        return kinds & Q(game_save_id=job.game_save_id)
    return kinds & Q(universe_id=job.universe_id, game_save__isnull=True)


def _lock_scope(job: Job):
    from studio.saves.models import Save
    from studio.universes.models import Universe

    if job.game_save_id is not None:
        return Save.objects.select_for_update().filter(pk=job.game_save_id).first()
    return Universe.objects.select_for_update().filter(pk=job.universe_id).first()


def _timestamp(value) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return None


def _not_before(job: Job) -> datetime | None:
    return _timestamp((job.payload or {}).get("not_before"))


def claim_next(seed: Job, worker: str) -> Job | None:
    """Claim the next eligible job in `seed`'s scope for `worker`; None if busy or idle."""
    claimed = claim_batch(seed, worker, limit=1)
    return claimed[0] if claimed else None


def batch_size() -> int:
    return max(1, int(getattr(settings, "AXIOM_JOB_BATCH_SIZE", 16) or 1))


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


def _claimed_at(job: Job) -> datetime | None:
    return _timestamp((job.payload or {}).get("claimed_at")) or job.started_at


def claim_batch(seed: Job, worker: str, *, limit: int = 1) -> list[Job]:
    """Claim the next eligible job in `seed`'s scope for `worker`, with up to `limit` - 1
    more of the same kind right behind it; [] if the scope is busy or idle.

    A batch is EMBED_TURN jobs (embedded with one model call) or consecutive LIVING_TURN
    jobs in turn order (run one by one); all of the save's current timeline generation,
    due now, and not held back by an earlier failed, paused or deferred turn.
    """
    now = timezone.now()
    with transaction.atomic():
        scope_row = _lock_scope(seed)
        if scope_row is None:
            return []
        scope_jobs = Job.objects.filter(_scope_filter(seed))
        unfinished = list(scope_jobs.filter(status__in=(*PENDING, JobStatus.RUNNING)))
        running_jobs = [j for j in unfinished if j.status == JobStatus.RUNNING]
        alive = _workers_alive(running_jobs, now)
        for running in running_jobs:
            holder = (running.payload or {}).get("worker", "")
            if holder == worker or alive.get(holder, True):
                return []
            payload = dict(running.payload or {})
            payload.pop("worker", None)
            running.payload = payload
            running.status = JobStatus.QUEUED
            running.progress = "runner lost (worker killed or timed out); running again"
            running.save(update_fields=["payload", "status", "progress"])
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
        for chosen_index, job in enumerate(candidates):
            ordered = job.kind in ORDERED_KINDS and job.timeline_generation == generation
            if ordered and blocked_from is not None and (
                job.turn_id or 0, job.id
            ) > blocked_from:
                if job.progress != blocked_why:
                    Job.objects.filter(pk=job.pk).update(progress=blocked_why[:200])
                continue
            due = _not_before(job)
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
        if limit > 1 and chosen.kind in BATCH_KINDS and chosen.timeline_generation == generation:
            ordered = chosen.kind in ORDERED_KINDS
            for job in candidates[chosen_index + 1:]:
                if len(batch) >= limit:
                    break
                fits = (
                    job.kind == chosen.kind
                    and job.status == JobStatus.QUEUED
                    and job.timeline_generation == generation
                    and not ((_not_before(job) or now) > now)
                    and (job.turn_id or 0) <= (current_turn or 0)
                )
                if ordered and blocked_from is not None and (job.turn_id or 0, job.id) > blocked_from:
                    fits = False
                if not fits:
                    if ordered:
                        break  # consecutive turns only: the rest waits for the next claim
                    continue
                batch.append(job)
        for job in batch:
            payload = dict(job.payload or {})
            payload["worker"] = worker
            payload["claimed_at"] = now.isoformat()
            payload.pop("not_before", None)
            if job.started_at is not None:
                payload["rerun"] = True  # an earlier attempt may have written (embedding replaces)
            if len(batch) > 1:
                payload["batch"] = len(batch)
            else:
                payload.pop("batch", None)
            job.payload = payload
            job.status = JobStatus.RUNNING
            job.attempts += 1
            if job is chosen or chosen.kind not in ORDERED_KINDS:
                job.started_at = job.started_at or now  # later turns of a living batch: when their turn comes
            job.finished_at = None
            job.progress = "running" if job is chosen else f"claimed with turn {chosen.turn_id} (batch of {len(batch)})"
        fields = ["payload", "status", "attempts", "started_at", "finished_at", "progress"]
        if len(batch) == 1:
            chosen.save(update_fields=fields)
        else:
            Job.objects.bulk_update(batch, fields)
        return batch


def run_job(job_id: int) -> None:
    """Run `job_id` (and whatever else is due in its scope) unless another runner holds it."""
    seed = Job.objects.filter(pk=job_id).first()
    if seed is None or seed.status not in (*PENDING, JobStatus.RUNNING):
        return
    worker = worker_identity()
    limit = batch_size()
    _local.running = True
    try:
        while True:
            batch = claim_batch(seed, worker, limit=limit)
            if not batch:
                return
            if len(batch) == 1:
                _execute(batch[0], worker)
            elif batch[0].kind == JobKind.EMBED_TURN:
                _execute_embed_batch(batch, worker)
            else:
                _execute_in_order(batch, worker)
    finally:
        _local.running = False


LOST = "lost"


def _execute(job: Job, worker: str, *, shared: dict | None = None) -> str:
    """Run one claimed job; return how it ended (a JobStatus, or LOST)."""
    from studio.memory import pipeline

    handler = pipeline.HANDLERS[job.kind]
    context = pipeline.JobContext(job=job, worker=worker, shared=shared if shared is not None else {})
    try:
        result = handler(context)
    except JobLost:
        logger.warning("job %s was re-claimed by another runner; dropping this run", job.pk)
        return LOST
    except JobSkipped as exc:
        _finish(job, worker, JobStatus.SKIPPED, progress=f"skipped: {exc}", error="")
        return JobStatus.SKIPPED
    except JobPaused as exc:
        _defer(job, worker, exc.resume_at, status=JobStatus.PAUSED, progress=f"paused: {exc.reason}", error=exc.reason)
        return JobStatus.PAUSED
    except Exception as exc:  # noqa: BLE001 - every failure is recorded on the job
        return _record_failure(job, worker, exc)
    if result is not None:
        # Handlers that write to the database mark the job done inside their own transaction;
        # the others (vector-only work) return their result here.
        _finish(job, worker, JobStatus.DONE, progress="done", error="", result=result)
    return JobStatus.DONE


def _record_failure(job: Job, worker: str, exc: Exception) -> str:
    """A failed attempt: back to QUEUED with backoff, or FAILED once out of attempts."""
    message = f"{exc.__class__.__name__}: {exc}"
    logger.warning("job %s (%s) failed: %s", job.pk, job.kind, message)
    detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=6))
    permanent = isinstance(exc, PermanentJobError) or getattr(exc, "retryable", True) is False
    if not permanent and job.attempts < settings.AXIOM_JOB_MAX_ATTEMPTS:
        wait = settings.AXIOM_JOB_RETRY_BACKOFF * (2 ** (job.attempts - 1))
        _defer(
            job,
            worker,
            timezone.now() + timedelta(seconds=wait),
            status=JobStatus.QUEUED,
            progress=f"retrying in {wait:g}s (attempt {job.attempts} failed)",
            error=message,
        )
        return JobStatus.QUEUED
    _finish(job, worker, JobStatus.FAILED, progress="failed", error=f"{message}\n\n{detail}")
    return JobStatus.FAILED


def _execute_in_order(batch: list[Job], worker: str) -> None:
    """Run a batch of living jobs one by one in turn order, sharing per-save lookups.

    Each job makes its own LLM calls and commits its own writes (the next turn's
    consolidation reads them). A job that does not end done or skipped (failed, deferred,
    paused, lost) releases the rest of the batch unrun: they go back to the queue, where
    the claim holds them behind the turn that did not go through.
    """
    shared: dict = {"batch_turns": [job.turn_id for job in batch]}
    for index, job in enumerate(batch):
        if index and not _touch_claim(job, worker):
            _release(batch[index:], worker)
            return
        outcome = _execute(job, worker, shared=shared)
        if outcome not in (JobStatus.DONE, JobStatus.SKIPPED):
            _release(batch[index + 1:], worker)
            return


def _execute_embed_batch(batch: list[Job], worker: str) -> None:
    """Embed a batch of turns with one model call, then close every job in one transaction.

    If the batch fails as a whole, its jobs run again one by one, so one bad turn (or a
    passing fault) costs only its own job an attempt.
    """
    from studio.memory import pipeline

    contexts = [pipeline.JobContext(job=job, worker=worker) for job in batch]
    try:
        outcomes = pipeline.run_embed_batch(contexts)
    except JobLost:
        logger.warning("embedding batch %s was re-claimed by another runner", [j.pk for j in batch])
        return
    except Exception as exc:  # noqa: BLE001 - fall back to one job at a time
        logger.warning("embedding batch of %s turns failed (%s: %s); running them one by one",
                       len(batch), exc.__class__.__name__, exc)
        for job in batch:
            if not _touch_claim(job, worker):
                continue
            _execute(job, worker)
        return
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
            if row is None:
                continue
            status, detail = outcomes[job.pk]
            _close(row, status, now=now, **detail)
            closed.append(row)
        if closed:
            Job.objects.bulk_update(closed, ["payload", "status", "progress", "error", "result", "finished_at"])


def _touch_claim(job: Job, worker: str) -> bool:
    """Refresh the claim time of a batched job as its turn comes (the holder is working)."""
    with transaction.atomic():
        row = _owned(job.pk, worker)
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


def _release(jobs: list[Job], worker: str) -> None:
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
            for key in ("worker", "claimed_at", "batch"):
                payload.pop(key, None)
            row.payload = payload
            row.status = JobStatus.QUEUED
            row.attempts = max(0, row.attempts - 1)
            row.progress = "queued"
        if rows:
            Job.objects.bulk_update(rows, ["payload", "status", "attempts", "progress"])


def _owned(job_id: int, worker: str) -> Job | None:
    row = Job.objects.select_for_update().filter(pk=job_id).first()
    if row is None or row.status != JobStatus.RUNNING or (row.payload or {}).get("worker") != worker:
        return None
    return row


def _finish(job: Job, worker: str, status: str, *, progress: str, error: str, result: dict | None = None) -> None:
    with transaction.atomic():
        row = _owned(job.pk, worker)
        if row is None:
            return
        mark_finished(row, status, progress=progress, error=error, result=result)


def mark_finished(row: Job, status: str, *, progress: str, error: str = "", result: dict | None = None) -> None:
    """Close a claimed job (call inside the transaction that holds its row)."""
    _close(row, status, progress=progress, error=error, result=result)
    row.save(update_fields=["payload", "status", "progress", "error", "result", "finished_at"])


def _close(row: Job, status: str, *, progress: str, error: str = "", result: dict | None = None, now=None) -> None:
    payload = dict(row.payload or {})
    payload.pop("worker", None)
    payload.pop("claimed_at", None)
    row.payload = payload
    row.status = status
    row.progress = progress[:200]
    row.error = error
    if result is not None:
        row.result = result
    row.finished_at = now or timezone.now()


def _defer(job: Job, worker: str, when: datetime, *, status: str, progress: str, error: str) -> None:
    with transaction.atomic():
        row = _owned(job.pk, worker)
        if row is None:
            return
        payload = dict(row.payload or {})
        payload.pop("worker", None)
        payload.pop("claimed_at", None)
        payload["not_before"] = when.isoformat()
        row.payload = payload
        row.status = status
        row.progress = progress[:200]
        row.error = error
        row.save(update_fields=["payload", "status", "progress", "error"])
        countdown = max(0.0, (when - timezone.now()).total_seconds())
        transaction.on_commit(lambda: send(row.pk, countdown=countdown + 0.05))
