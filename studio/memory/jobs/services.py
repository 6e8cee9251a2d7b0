"""Queueing and retrying jobs: what the apps call.

Every `enqueue_*` creates its Job rows in the caller's transaction (`ledger.job_create`);
a runner gets them when that transaction commits. `job_retry` puts a failed, skipped or
paused job back in the queue; a job of an `immediate` kind (a rewind's vector delete, a
fork's vector copy) is then run at once, in the caller's thread, so the page that asked
shows its outcome. Whether a job can be retried is decided here, under the row's lock, and
nowhere else: any other job raises `JobNotRetryable`, which the Jobs page turns into a note
and the API into 409 `conflict`.
"""
from __future__ import annotations

from django.utils import timezone

from studio.memory.lore import embedding_state
from studio.memory.jobs import ledger, registry, runner
from studio.memory.models import Job, JobKind, JobStatus


class JobNotRetryable(Exception):
    """The job is queued, running or done: nothing to retry (a done job's results stand)."""

    def __init__(self, job: Job):
        super().__init__(f"Job {job.pk} is {job.status}; only failed, skipped or paused jobs can be retried.")
        self.job = job


def enqueue_sync_lore(*, universe=None, game_save=None) -> Job:
    """Queue a re-embedding of a Lore Book and return its job.

    With `universe`: embed the universe's own Lore Book under `universe.lore_scope_id`, then
    re-sync the lore of each of its saves (one save-scoped job each, queued when this one
    runs). With `game_save`: that save's lore only. For a universe, the entries'
    `embedding_state` goes to pending now and to embedded or failed when the job ends. A
    sync already queued and not started for the same scope is reused instead of queueing
    another.
    """
    from studio.universes.models import EmbeddingState, LoreEntry

    if (universe is None) == (game_save is None):
        raise ValueError("pass exactly one of universe= or game_save=")
    if universe is not None:
        scope = {"universe": universe, "game_save": None}
        # The entries' state tracks the universe's own Lore Book embedding.
        embedding_state.lore_embedding_state_set(
            LoreEntry.objects.filter(universe_id=universe.pk), state=EmbeddingState.PENDING
        )
    else:
        scope = {"universe_id": game_save.universe_id, "game_save": game_save}
    existing = (
        Job.objects.filter(kind=JobKind.SYNC_LORE, status=JobStatus.QUEUED, started_at__isnull=True, **scope)
        .order_by("id")
        .first()
    )
    if existing is not None:
        return existing
    generation = game_save.timeline_generation if game_save is not None else 0
    return ledger.job_create(kind=JobKind.SYNC_LORE, timeline_generation=generation, progress="queued", **scope)


def enqueue_turn(*, game_save, turn_id: int, reextract: bool = False) -> list[Job]:
    """Queue the work for a new (or edited) turn and return the jobs.

    Always an EMBED_TURN job (the narrative into the vector store); in living mode also a
    LIVING_TURN job (extract -> facts -> consolidate -> beliefs -> reflect -> mental models).
    `reextract` marks an edited turn: its living job first removes what the old narrative
    produced, and older living jobs still waiting for that turn are superseded.
    """
    generation = game_save.timeline_generation
    jobs = [
        ledger.job_create(
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
            ledger.job_create(
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
    return ledger.job_create(
        kind=JobKind.REFRESH_MODELS,
        universe_id=game_save.universe_id,
        game_save=game_save,
        turn_id=game_save.current_turn,
        timeline_generation=game_save.timeline_generation,
        progress="queued",
    )


def job_retry(*, job: Job) -> Job:
    """Put a failed, skipped or paused job back in the queue (same row) and return it.

    Raise JobNotRetryable, changing nothing, for a queued, running or done job (as it stands
    under the lock, whatever `job` says; a done job's results stand: edit the turn to
    re-extract it). A job of an immediate kind (rewind's vector delete, fork's
    vector copy) is run now, in this thread; must not be called inside an open transaction
    then (the vector store is outside the database).
    """
    try:
        immediate = registry.handler_for(job.kind).immediate
    except LookupError:
        immediate = False
    row, requeued = ledger.job_requeue(job=job, wake=not immediate)
    if not requeued:
        raise JobNotRetryable(row)
    if immediate:
        runner.run_now(row.pk)
        row.refresh_from_db()
    return row

