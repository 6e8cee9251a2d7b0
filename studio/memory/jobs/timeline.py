"""Which jobs a rewind keeps: the timeline rule every per-turn job is checked against.

A per-turn job (EMBED_TURN, LIVING_TURN, REFRESH_MODELS: `TIMELINE_KINDS`) belongs to a
turn of a save's timeline. The rule:

- work for a turn that **survives** a rewind (turn <= the rewind's target) is kept, or
  redone when the rewind changed what the job had already read;
- work for a turn the rewind **drops** (turn > target) is never written, not even once a new
  turn with the same number has been appended.

How it holds. A job carries the timeline generation it belongs to. The rewind, in its own
transaction and under the save's lock, moves the jobs of the turns it keeps to the new
generation (`job_timeline_rewind`) and leaves those of the dropped turns on the old one
(a queued one ends skipped when a runner reaches it, before it reads anything). So, at any moment, a job whose generation equals
its save's is for a turn on the live timeline, and one whose generation is older was
dropped by some rewind (a new turn 3 appended after a rewind to 2 gets new jobs; the old
turn 3's keep the old generation for ever). A job checks this (`job_timeline_check`) when it
starts and again at write time, under the save's lock, in the transaction that writes its
results (`JobContext.check_timeline`, `JobContext.commit`), so a rewind cannot slip between
the check and the write.

A living job (or a mental-model refresh) that is *running* while a rewind keeps its turn
may have read beliefs or mental models the rewind then rolled back. When the rewind
changed any (`memory_rewound`), the job is flagged `redo`: at its write it writes nothing
and goes back to the queue (`ledger.JobRedo`, its attempt not counted) to run again on the
rewound memory. When the rewind changed none, what it read is still true and it writes.
An embedding reads only its turn's narrative, which a kept turn keeps: it is never redone.

A mental-model refresh is not tied to one turn's narrative: a rewind before its turn moves
a pending one to the rewind's target instead of dropping it (the stale models still need
it).

Recovering a job a rewind left behind (`job_timeline_recover`, called by `job_retry`): a
skipped or failed job of an older generation is brought onto the live timeline only if its
turn is still the turn it was queued for (`job_turn_gone`): the save's Event of that turn
is the one recorded in the job's payload (`payload["event"]`, set for every turn job queued
since), or, for an older job without it, was created before the job (an Event appended
again after a rewind is newer than the old turn's jobs); and no newer job of the same kind
and turn replaced it (an edit's re-extraction). Until issue 19's fix a rewind skipped the
jobs of the turns it kept too; those are recovered this way, the jobs of dropped turns never.

A fork at N copies memory as the source holds it and re-queues, for itself, every kind of
work the source had not finished for turns <= N: the turns whose latest embedding or living
job has not ended done (`jobs_unfinished_up_to`) are worked again for the fork
(`studio.saves.checkpoints`); the timeline tables' `forked` hooks queue the rest (the chapter
summaries pending at N, `memory/chapters/timeline.py`; a refresh of the mental models the
fork holds stale, `memory/timeline_tables.py`).
"""

from __future__ import annotations

from django.db.models import Max, Q

from studio.memory.jobs.ledger import REDO_KEY, RETRYABLE_STATUSES, TURN_KINDS, UNFINISHED
from studio.memory.models import Job, JobKind, JobStatus

# Work that belongs to a turn of a save's timeline (the other kinds never check it).
TIMELINE_KINDS = (JobKind.EMBED_TURN, JobKind.LIVING_TURN, JobKind.REFRESH_MODELS, JobKind.SUMMARIZE_CHAPTER)
# Kinds whose reads a rewind can change under them (beliefs, mental models).
MEMORY_READING_KINDS = (JobKind.LIVING_TURN, JobKind.REFRESH_MODELS)
# The payload key naming the Event (pk) a turn job was queued for.
EVENT_KEY = "event"


def job_timeline_rewind(*, game_save, target_turn: int, generation: int, memory_rewound: bool) -> dict[str, int]:
    """Carry the save's per-turn jobs across a rewind to `target_turn`; return counts per outcome.

    Call inside the rewind's transaction, with `game_save` the locked row as it was before
    the rewind (its `timeline_generation` the old one) and `generation` the new one.
    `memory_rewound`: the rewind rolled back beliefs or mental models (a running living or
    refresh job may have read them). Finished (done) jobs are left as they are.

    - jobs of kept turns (turn <= `target_turn`) move to `generation`, whatever their state
      (queued and paused ones run on the new timeline; failed and skipped ones can be
      retried there); running living / refresh jobs are flagged to redo if `memory_rewound`;
    - a pending (queued, paused, running) mental-model refresh of a later turn is moved to
      `target_turn` and carried the same way;
    - jobs of dropped turns stay on the old generation: a queued or paused one ends skipped
      when a runner reaches it, a running one at its write, a retried one at its start;
      none writes anything.
    Return {"carried", "redo", "dropped"}.
    """
    # Every status but done, named: the (game_save, status) index finds the few unfinished jobs of a
    # long save, where excluding done would read all its done ones (issue 33).
    old = Job.objects.filter(
        game_save_id=game_save.pk,
        status__in=[status for status in JobStatus.values if status != JobStatus.DONE],
        kind__in=TIMELINE_KINDS,
        timeline_generation=game_save.timeline_generation,
    )
    pending_refresh = Q(kind=JobKind.REFRESH_MODELS, status__in=UNFINISHED)
    kept = old.filter(Q(turn_id__lte=target_turn) | pending_refresh)
    redo = kept.filter(status=JobStatus.RUNNING, kind__in=MEMORY_READING_KINDS) if memory_rewound else kept.none()
    redone = 0
    for row in redo.select_for_update():
        row.payload = {**(row.payload or {}), REDO_KEY: f"the rewind to turn {target_turn} changed the memory it read"}
        row.save(update_fields=["payload"])
        redone += 1
    old.filter(pending_refresh, turn_id__gt=target_turn).update(turn_id=target_turn)
    carried = kept.update(timeline_generation=generation)
    return {"carried": carried, "redo": redone, "dropped": old.count()}


def _event_of(save_pk: int, turn_id: int):
    from studio.world.models import Event

    return Event.objects.filter(game_save_id=save_pk, turn_id=turn_id).values("pk", "created_at").first()


def _same_turn(job: Job, event: dict | None) -> bool:
    """True when `event` (pk, created_at) is the turn `job` was queued for."""
    if event is None:
        return False
    recorded = (job.payload or {}).get(EVENT_KEY)
    if recorded is not None:
        return recorded == event["pk"]
    # A job queued before the Event pk was recorded: the turn's Event is created in the
    # transaction that queues its jobs, just before them; a turn played again after a
    # rewind has a newer Event than the old turn's jobs.
    return event["created_at"] <= job.created_at


def job_is_for_event(job: Job, event: dict | None) -> bool:
    """True when `event` ({"pk", "created_at"}) is the turn `job` was queued for: not an earlier
    version of its turn number that a rewind (an Undo, a Retry) dropped. The turn page sorts
    a turn's LLM calls with it."""
    return _same_turn(job, event)


def job_turn_gone(job: Job, save) -> str:
    """Return why `job` is not work for a turn of `save`'s live timeline ("" when it is).

    `save` must be read under its lock. A refresh of the mental models is not tied to a
    turn's narrative: it is always live (it moves to the save's turn when recovered).
    """
    if job.kind not in TURN_KINDS:
        return ""
    turn = job.turn_id
    if turn is None or turn > save.current_turn:
        return f"turn {turn} was dropped by a rewind (the save is at turn {save.current_turn})"
    if not _same_turn(job, _event_of(save.pk, turn)):
        return (
            f"turn {turn} was dropped by a rewind and played again since this job was queued; "
            f"the new turn {turn} has jobs of its own"
        )
    newer = (
        Job.objects.filter(game_save_id=save.pk, kind=job.kind, turn_id=turn, pk__gt=job.pk)
        .order_by("pk")
        .values_list("pk", flat=True)
        .first()
    )
    if newer is not None:
        return f"job {newer} replaced it (a newer {job.get_kind_display().lower()} job of turn {turn})"
    return ""


def job_timeline_recover(*, job: Job, strict: bool = False) -> tuple[Job, str]:
    """Bring a retryable per-turn job of an older generation onto its save's live timeline.

    Call inside the retry's transaction. Locks the save and the job's row; returns the row
    and "" when the job may be retried (moved to the save's generation if it was on an
    older one), or the row and why not (`job_turn_gone`; nothing changed). A job of the
    live generation is checked only when `strict` (a bulk recovery, which must not run an
    edit's superseded job). A job that is not per-turn, or not retryable as it stands, is
    returned as it is with "" (the ledger's requeue decides).
    """
    from studio.world.models import Save

    if job.game_save_id is None or job.kind not in TIMELINE_KINDS:
        return job, ""
    save = Save.objects.select_for_update().only("pk", "current_turn", "timeline_generation").get(pk=job.game_save_id)
    row = Job.objects.select_for_update().get(pk=job.pk)
    if row.status not in RETRYABLE_STATUSES:
        return row, ""
    if row.timeline_generation == save.timeline_generation and not strict:
        return row, ""
    why = job_turn_gone(row, save)
    if why:
        return row, why
    if row.timeline_generation != save.timeline_generation:
        row.timeline_generation = save.timeline_generation
        fields = ["timeline_generation"]
        if row.turn_id is not None and row.turn_id > save.current_turn:  # a refresh: as of the live turn
            row.turn_id = save.current_turn
            fields.append("turn_id")
        row.save(update_fields=fields)
    return row, ""


def jobs_unfinished_up_to(*, game_save, turn: int) -> list[Job]:
    """Return the latest embedding and living job of each of the save's turns <= `turn`
    that has not ended done (queued, running, paused, failed or skipped), in turn order.

    Only jobs of the turns as they stand (`_same_turn`): a job of a dropped turn whose number
    was played again does not count. Read under the save's lock (a fork does).
    """
    from studio.world.models import Event

    latest = (
        Job.objects.filter(game_save_id=game_save.pk, kind__in=TURN_KINDS, turn_id__lte=turn)
        .values("kind", "turn_id")
        .annotate(last=Max("pk"))
        .values("last")
    )
    rows = list(Job.objects.filter(pk__in=latest).exclude(status=JobStatus.DONE).order_by("turn_id", "pk"))
    events = {
        row["turn_id"]: row
        for row in Event.objects.filter(game_save_id=game_save.pk, turn_id__in={r.turn_id for r in rows}).values(
            "turn_id", "pk", "created_at"
        )
    }
    return [row for row in rows if _same_turn(row, events.get(row.turn_id))]


def jobs_dropped_by_rewind(jobs, save) -> dict[int, str]:
    """Return {job pk: why} for those of `jobs` (a page's list) whose turn a rewind dropped; two queries at most.

    The batch form of `job_turn_gone`'s first two cases, for listing: a turn job whose turn
    is past the save's current turn, or whose turn was played again since (another Event),
    belongs to an abandoned timeline whatever its status says (a Done job stays Done in the
    ledger: it did its work, on turns that no longer exist).
    """
    turn_jobs = [job for job in jobs if job.kind in TURN_KINDS and job.turn_id is not None]
    if not turn_jobs:
        return {}
    from studio.world.models import Event

    live = {job.turn_id for job in turn_jobs if job.turn_id <= save.current_turn}
    events = (
        {
            row["turn_id"]: row
            for row in Event.objects.filter(game_save_id=save.pk, turn_id__in=live).values(
                "turn_id", "pk", "created_at"
            )
        }
        if live
        else {}
    )
    gone = {}
    for job in turn_jobs:
        if job.turn_id > save.current_turn:
            gone[job.pk] = f"turn {job.turn_id} was dropped by a rewind (the save is at turn {save.current_turn})"
        elif not _same_turn(job, events.get(job.turn_id)):
            gone[job.pk] = f"turn {job.turn_id} was dropped by a rewind and played again since"
    return gone
