"""The dispatcher: hand a job id to a runner, on the configured back end.

- Celery on Redis when `settings.REDIS_URL` is set: the task `studio.memory.run_job`
  (`studio.memory.tasks`), sent by name;
- otherwise a small in-process thread pool (`AXIOM_INPROCESS_WORKERS` threads), so a
  request never waits for embeddings or an LLM; deferred retries wait on a timer thread;
- inline when `AXIOM_JOBS_EAGER` is on (tests, scripts).

The ledger wakes the dispatcher after the transaction that queued (or deferred) a job
commits, so a job never runs before the rows it reads exist and a rolled-back request
leaves no job behind. Importing this module installs `send` as the ledger's waker.

If the broker cannot be reached, the job is marked FAILED with an error starting with
`QUEUE_DOWN_PREFIX`: nothing is lost (its rows are committed) and a retry sends it again.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from studio.celery import app as celery_app
from studio.memory.jobs import ledger
from studio.memory.jobs.runner import inside_runner, not_queued, run_job
from studio.memory.models import Job, JobStatus

logger = logging.getLogger(__name__)

QUEUE_DOWN_PREFIX = "Could not reach the job queue"
CELERY_TASK_NAME = "studio.memory.run_job"

_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def send(job_id: int, *, countdown: float = 0) -> None:
    """Start running `job_id` now (or after `countdown` seconds) on the configured runner."""
    if getattr(settings, "AXIOM_JOBS_EAGER", False):
        # Inside a runner the drain loop reaches the job by itself once it is due.
        if inside_runner() or countdown > 0:
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


def _wake(job_id: int, countdown: float) -> None:
    # Looked up at call time, so a test or a benchmark can replace `send`.
    send(job_id, countdown=countdown)


def _send_celery(job_id: int, countdown: float) -> None:
    try:
        with celery_app.connection_for_write(url=settings.REDIS_URL, connect_timeout=3) as connection:
            result = celery_app.send_task(
                CELERY_TASK_NAME,
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
        Job.objects.filter(pk=job_id, status__in=ledger.PENDING).update(
            status=JobStatus.FAILED, error=error, progress="not queued", finished_at=timezone.now()
        )
        job = Job.objects.filter(pk=job_id).first()
        if job is not None:  # what waited on the job must not look "pending" forever
            not_queued(job, error)
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


ledger.set_waker(_wake)
