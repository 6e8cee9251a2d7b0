"""Celery tasks of the memory app: one task runs any Job by id (see `studio.memory.jobs`).

The task takes the Job id, re-reads the row and lets the runner claim work in the job's
scope, so it is idempotent: a duplicate or redelivered message finds the job done (or
claimed by a live runner) and returns. Job-level retries with backoff are scheduled by the
ledger itself (it records each failure on the Job); the task-level autoretry only covers
the database being unreachable. The time limits are the CELERY_TASK_(SOFT_)TIME_LIMIT
settings; a killed worker child is redelivered (`acks_late`, `reject_on_worker_lost`). The
dispatcher sends the task by its name (`studio.memory.jobs.dispatch.CELERY_TASK_NAME`).
"""

from __future__ import annotations

from celery import shared_task
from django.db import DatabaseError, InterfaceError, OperationalError

from studio.memory.jobs.runner import run_job


@shared_task(
    name="studio.memory.run_job",
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(OperationalError, InterfaceError, DatabaseError),
    retry_backoff=2,
    retry_backoff_max=60,
    retry_jitter=True,
    max_retries=8,
    ignore_result=True,
)
def run_job_task(job_id: int) -> None:
    run_job(int(job_id))
