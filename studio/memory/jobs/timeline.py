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
"""
from __future__ import annotations

from django.db.models import Q

from studio.memory.jobs.ledger import REDO_KEY, UNFINISHED
from studio.memory.models import Job, JobKind, JobStatus

# Work that belongs to a turn of a save's timeline (the other kinds never check it).
TIMELINE_KINDS = (JobKind.EMBED_TURN, JobKind.LIVING_TURN, JobKind.REFRESH_MODELS)
# Kinds whose reads a rewind can change under them (beliefs, mental models).
MEMORY_READING_KINDS = (JobKind.LIVING_TURN, JobKind.REFRESH_MODELS)


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
    old = Job.objects.filter(
        game_save_id=game_save.pk,
        kind__in=TIMELINE_KINDS,
        timeline_generation=game_save.timeline_generation,
    ).exclude(status=JobStatus.DONE)
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
