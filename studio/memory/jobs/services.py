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

from django.db import transaction
from django.utils import timezone

from studio.memory.lore import embedding_state
from studio.memory.jobs import ledger, registry, runner, timeline
from studio.memory.models import Job, JobKind, JobStatus


class JobNotRetryable(Exception):
    """The job cannot be retried: it is queued, running or done (a done job's results
    stand), or its turn is no longer on the save's live timeline (`reason` says why)."""

    def __init__(self, job: Job, reason: str = ""):
        if reason:
            message = f"Job {job.pk} cannot be retried: {reason}."
        else:
            message = f"Job {job.pk} is {job.status}; only failed, skipped or paused jobs can be retried."
        super().__init__(message)
        self.job = job
        self.reason = reason


def enqueue_sync_lore(*, universe=None, game_save=None) -> Job:
    """Queue a re-embedding of a Lore Book and return its job.

    With `universe`: embed the universe's own Lore Book under `universe.lore_scope_id`, then
    re-sync the lore of each of its saves (one save-scoped job each, queued when this one
    runs). With `game_save`: that save's lore only. For a universe, the entries'
    `embedding_state` goes to pending now and to embedded or failed when the job ends. A
    sync already queued and not started for the same scope is reused instead of queueing
    another.
    """
    from studio.world.models import EmbeddingState, LoreEntry

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


def _turn_payload(flag: str, on: bool, event_id: int | None) -> dict:
    payload = {flag: True} if on else {}
    if event_id is not None:
        payload[timeline.EVENT_KEY] = event_id  # which turn this is (`timeline.job_turn_gone`)
    return payload


def enqueue_living_turn(*, game_save, turn_id: int, event_id: int | None = None, reextract: bool = False) -> Job:
    """Queue one LIVING_TURN job (extract, consolidate, reflect) for a turn of a living save."""
    return ledger.job_create(
        kind=JobKind.LIVING_TURN,
        universe_id=game_save.universe_id,
        game_save=game_save,
        turn_id=turn_id,
        timeline_generation=game_save.timeline_generation,
        payload=_turn_payload("reextract", reextract, event_id),
        progress="queued",
    )


def enqueue_turn(*, game_save, turn_id: int, reextract: bool = False, event_id: int | None = None) -> list[Job]:
    """Queue the work for a new (or edited) turn and return the jobs.

    Always an EMBED_TURN job (the narrative into the vector store); in living mode also a
    LIVING_TURN job (extract -> facts -> consolidate -> beliefs -> reflect -> mental models).
    `reextract` marks an edited turn: its living job first removes what the old narrative
    produced, and older living jobs still waiting for that turn are superseded. `event_id`,
    the turn's Event, is recorded on the jobs: a retry after a rewind knows by it whether
    the turn is still the one they were queued for.
    """
    generation = game_save.timeline_generation
    jobs = [
        ledger.job_create(
            kind=JobKind.EMBED_TURN,
            universe_id=game_save.universe_id,
            game_save=game_save,
            turn_id=turn_id,
            timeline_generation=generation,
            payload=_turn_payload("replace", reextract, event_id),
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
            ).update(
                status=JobStatus.SKIPPED, progress="superseded by a newer edit of this turn", finished_at=timezone.now()
            )
        jobs.append(enqueue_living_turn(game_save=game_save, turn_id=turn_id, event_id=event_id, reextract=reextract))
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


def job_retry(*, job: Job, strict: bool = False) -> Job:
    """Put a failed, skipped or paused job back in the queue (same row) and return it.

    Raise JobNotRetryable, changing nothing, for a queued, running or done job (as it stands
    under the lock, whatever `job` says; a done job's results stand: edit the turn to
    re-extract it). A per-turn job of an older timeline generation (one a rewind skipped)
    is brought onto the live timeline if its turn is still the one it was queued for, and
    raises JobNotRetryable with the reason if a rewind dropped that turn or a newer job
    replaced it (`timeline.job_timeline_recover`; with `strict`, a turn job of the live
    generation is checked the same way). A job of an immediate kind (rewind's
    vector delete, fork's vector copy) is run now, in this thread; must not be called
    inside an open transaction then (the vector store is outside the database).
    """
    try:
        immediate = registry.handler_for(job.kind).immediate
    except LookupError:
        immediate = False
    with transaction.atomic():
        row, why = timeline.job_timeline_recover(job=job, strict=strict)
        if why:
            raise JobNotRetryable(row, why)
        row, requeued = ledger.job_requeue(job=row, wake=not immediate)
        if not requeued:
            raise JobNotRetryable(row)
    if immediate:
        runner.run_now(row.pk)
        row.refresh_from_db()
    return row


def jobs_retry_skipped(*, game_save) -> dict:
    """Retry every skipped per-turn job of the save whose turn is still live; return counts.

    The recovery for a save whose memory jobs a rewind skipped (before issue 19's fix a
    rewind skipped the jobs of the turns it kept too): each skipped embedding, living or
    refresh job goes through `job_retry` (strict), so those of turns still on the live
    timeline are queued on it, and those of dropped turns, or replaced by a newer job of
    their turn (an edit's), are left as they are. Return
    {"recovered": n, "left": m, "reasons": [up to 5 of why jobs were left]}.
    """
    candidates = Job.objects.filter(
        game_save_id=game_save.pk, kind__in=timeline.TIMELINE_KINDS, status=JobStatus.SKIPPED
    ).order_by("turn_id", "pk")
    recovered, left, reasons = 0, 0, []
    for job in candidates:
        try:
            job_retry(job=job, strict=True)
        except JobNotRetryable as exc:
            left += 1
            if len(reasons) < 5:
                reasons.append(str(exc))
        else:
            recovered += 1
    return {"recovered": recovered, "left": left, "reasons": reasons}
