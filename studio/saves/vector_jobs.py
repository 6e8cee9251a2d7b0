"""The vector side of rewind and fork, as jobs of the ledger (`studio.memory.jobs`).

VECTOR_ROLLBACK deletes a save's chunks after turn N once a rewind's transaction has
committed; FORK_VECTORS copies a save's chunks up to turn N into its fork. `SavesConfig.
ready()` registers both as *immediate* kinds: `CheckpointManager` runs the job right after
its commit (and reports the outcome in the rewind's result), and a retry from the Jobs page
or the API runs it at once; a failed attempt is retried with the ledger's backoff, like any
job, until it succeeds or is out of attempts (then FAILED, retryable by hand).

Both are idempotent. A delete to turn N covers every pending delete to a later turn (those
jobs end done, "covered by job ..."). Turns played again after a failed delete had their
chunks mixed with the dead timeline's, so after deleting > N the delete re-embeds the live
narratives after N. A copy that is run again first clears what an earlier attempt copied.
A fork made while the source still had turns <= N to embed lists them
(`payload["embed_turns"]`): the copy embeds them from the fork's Events once it has copied.
"""

from __future__ import annotations

import time

from django.utils import timezone

from studio.memory.jobs import JobContext
from studio.memory.models import Job, JobKind, JobStatus
from studio.world.models import Event, Save

# A vector job not known to have completed.
PENDING_STATUSES = (JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.FAILED)


def run_vector_rollback(ctx: JobContext):
    """Delete the save's chunks after the job's turn; re-embed turns played since."""
    job = ctx.job
    save = Save.objects.get(pk=job.game_save_id)
    target = job.turn_id
    started = time.perf_counter()
    vectors = ctx.vectors
    ctx.progress(f"deleting vector chunks after turn {target}", force=True)
    deleted = vectors.rollback(save.save_id, target)
    replayed = 0
    if save.current_turn > target:
        for turn_id, narrative in (
            Event.objects.filter(game_save_id=save.pk, turn_id__gt=target)
            .order_by("turn_id")
            .values_list("turn_id", "narrative")
        ):
            vectors.update_turn_narrative(save.save_id, turn_id, narrative)
            replayed += 1
    seconds = time.perf_counter() - started

    def write(_save):
        # One successful delete > target also covers every pending delete to a later turn.
        Job.objects.filter(
            game_save_id=save.pk,
            kind=JobKind.VECTOR_ROLLBACK,
            status__in=PENDING_STATUSES,
            turn_id__gte=target,
        ).exclude(pk=job.pk).update(
            status=JobStatus.DONE, progress=f"covered by job {job.pk}", finished_at=timezone.now()
        )
        return {
            "deleted": deleted if isinstance(deleted, int) else None,
            "replayed_turns": replayed,
            "seconds": seconds,
        }

    ctx.commit(write, check_timeline=False)
    return None


def run_fork_vectors(ctx: JobContext):
    """Copy the source save's chunks up to the job's turn into the fork (the job's save)."""
    job = ctx.job
    fork = Save.objects.get(pk=job.game_save_id)
    vectors = ctx.vectors
    if (job.payload or {}).get("rerun"):
        # An earlier attempt may have copied part of the chunks: start clean.
        vectors.rollback(fork.save_id, -1)
    copied = vectors.copy_save(job.payload["source_save_id"], fork.save_id, max_turn_id=job.turn_id)
    # Turns the source had not embedded when the fork was made: embedded here, after the
    # copy (which replaces the fork's chunks up to its turn), from the fork's own Events as
    # they still stand (a rewind of the fork since dropped some).
    pending = {event_pk: turn for turn, event_pk in (job.payload or {}).get("embed_turns", [])}
    texts = dict(
        Event.objects.filter(game_save_id=fork.pk, pk__in=pending, turn_id__lte=fork.current_turn).values_list(
            "turn_id", "narrative"
        )
    )
    if texts:
        ctx.progress(f"embedding {len(texts)} turn(s) the source had not embedded yet", force=True)
        vectors.update_turn_narratives(fork.save_id, {turn: texts[turn] for turn in sorted(texts)})
    return {"copied": copied if isinstance(copied, int) else None, "embedded_turns": sorted(texts)}
