"""Background jobs: one ledger for every kind of job, a handler registry, the runner.

Layers, each importing only the ones above it in this list:

- `ledger`     the Job rows: states, finish / defer / fail, retry with backoff, the
               exceptions, `RETRYABLE_STATUSES`;
- `claims`     which runner works on which jobs: claims (`claim_batch`, `claim_one`), one
               runner per scope, the jobs of a runner that died queued again;
- `timeline`   the rule of which per-turn jobs a rewind keeps: `job_timeline_rewind`, run
               in the rewind's transaction (a job checks it with
               `registry.job_timeline_check` before it writes);
- `registry`   which handler runs each JobKind (apps register theirs in
               `AppConfig.ready()`), and the `JobContext` a handler is given;
- `runner`     `run_job` drains a scope, `run_now` runs one immediate job here;
- `dispatch`   hands job ids to Celery, the in-process pool, or runs them inline (eager);
- `services`   `enqueue_*`, `job_retry` (`JobNotRetryable`) and `jobs_retry_skipped`, what the
               apps call; `selectors` the reads.

The engine's ledger knows the models it stores against (Job, Save, Universe, LoreEntry),
never an app's services, views or checkpoints: the saves app registers the vector jobs of
rewind and fork, the memory app the embedding and living-pipeline ones (see their
`apps.py`). Import from this package (`from studio.memory import jobs`).
"""

from studio.memory.jobs.claims import worker_identity
from studio.memory.jobs.dispatch import QUEUE_DOWN_PREFIX, send, shutdown_inprocess_runner
from studio.memory.jobs.ledger import (
    ORDERED_KINDS,
    PENDING,
    RETRYABLE_STATUSES,
    UNFINISHED,
    JobLost,
    JobPaused,
    JobRedo,
    JobSkipped,
    PermanentJobError,
    job_create,
)
from studio.memory.jobs.registry import JobContext, JobHandler, check_timelines, handler_for, register, registered_kinds
from studio.memory.jobs.runner import LOST, Outcome, batch_size, claim_batch, run_job, run_now
from studio.memory.jobs.selectors import jobs_active_for_save, jobs_for_save
from studio.memory.jobs.services import (
    JobNotRetryable,
    enqueue_living_turn,
    enqueue_refresh_models,
    enqueue_sync_lore,
    enqueue_turn,
    job_retry,
    jobs_retry_skipped,
)
from studio.memory.jobs.timeline import (
    TIMELINE_KINDS,
    job_timeline_recover,
    job_timeline_rewind,
    job_turn_gone,
    jobs_dropped_by_rewind,
    jobs_unfinished_up_to,
)

__all__ = [
    "check_timelines",
    "LOST",
    "ORDERED_KINDS",
    "PENDING",
    "QUEUE_DOWN_PREFIX",
    "RETRYABLE_STATUSES",
    "TIMELINE_KINDS",
    "UNFINISHED",
    "JobContext",
    "JobHandler",
    "JobLost",
    "JobNotRetryable",
    "JobPaused",
    "JobRedo",
    "JobSkipped",
    "Outcome",
    "PermanentJobError",
    "batch_size",
    "claim_batch",
    "enqueue_living_turn",
    "enqueue_refresh_models",
    "enqueue_sync_lore",
    "enqueue_turn",
    "handler_for",
    "job_create",
    "job_retry",
    "job_timeline_recover",
    "job_timeline_rewind",
    "job_turn_gone",
    "jobs_active_for_save",
    "jobs_dropped_by_rewind",
    "jobs_for_save",
    "jobs_retry_skipped",
    "jobs_unfinished_up_to",
    "register",
    "registered_kinds",
    "run_job",
    "run_now",
    "send",
    "shutdown_inprocess_runner",
    "worker_identity",
]
