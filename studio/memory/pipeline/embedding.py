"""EMBED_TURN: a turn's narrative into the save's vector memory, one turn or a batch.

Only `VectorMemory`'s public API is used: `update_turn_narrative` for one turn and
`update_turn_narratives` for a batch (one encode call for all the turns, then their old
chunks deleted), both of which replace a turn's chunks, so an edit, a re-run after a crash
or a turn number reused after a rewind never duplicates. Chroma is outside the
transaction: after embedding, the job checks its turn is still on the live timeline
(`JobContext.check_timeline`: a rewind to the turn or later keeps it, and the job ends done);
if a rewind dropped the turn meanwhile it deletes whatever lies beyond the live horizon
again and ends skipped (queries never see those chunks anyway: they use the save's current
turn as their horizon).
"""
from __future__ import annotations

import time

from studio.memory.jobs import JobContext, JobSkipped
from studio.memory.models import JobStatus


def run_embed_turn(ctx: JobContext):
    """Embed (or re-embed) one turn's narrative into the save's vector memory."""
    from studio.saves.models import Event

    save = ctx.save()
    ctx.check_timeline(save)
    event = Event.objects.filter(game_save_id=save.pk, turn_id=ctx.job.turn_id).first()
    if event is None:
        raise JobSkipped(f"turn {ctx.job.turn_id} no longer exists")
    vectors = ctx.vectors
    t0 = time.perf_counter()
    vectors.update_turn_narrative(save.save_id, event.turn_id, event.narrative)
    seconds = time.perf_counter() - t0
    try:
        ctx.check_timeline(save)
    except JobSkipped:
        # A rewind dropped the turn meanwhile and may have deleted chunks before this one
        # landed: remove whatever lies beyond the live horizon again (queries never see it).
        vectors.rollback(save.save_id, save.current_turn)
        raise JobSkipped("timeline rewound during embedding; the chunk was removed again") from None
    return {"turn_id": event.turn_id, "chars": len(event.narrative), "timings": {"embed_seconds": round(seconds, 4)}}


def run_embed_batch(contexts: list[JobContext]) -> dict[int, tuple[str, dict]]:
    """Embed several turns of one save with one model call; return each job's outcome.

    The outcome per job id is (status, {"progress", "result"}) for the runner to record in
    one transaction. Same checks as `run_embed_turn`: a job whose turn a rewind dropped, or
    of a turn that no longer exists, is skipped; a rewind during the embedding removes the
    chunks beyond the live horizon again and skips the jobs of the turns it dropped (those
    of the turns it kept end done).
    """
    from studio.saves.models import Event

    save = contexts[0].save()
    outcomes: dict[int, tuple[str, dict]] = {}
    live: list[JobContext] = []
    for ctx in contexts:
        try:
            ctx.check_timeline(save)
        except JobSkipped as exc:
            outcomes[ctx.job.pk] = (JobStatus.SKIPPED, {"progress": f"skipped: {exc}"})
            continue
        live.append(ctx)
    texts = dict(
        Event.objects.filter(game_save_id=save.pk, turn_id__in={ctx.job.turn_id for ctx in live}).values_list(
            "turn_id", "narrative"
        )
    )
    for ctx in list(live):
        if ctx.job.turn_id not in texts:
            outcomes[ctx.job.pk] = (JobStatus.SKIPPED, {"progress": f"skipped: turn {ctx.job.turn_id} no longer exists"})
            live.remove(ctx)
    if not live:
        return outcomes
    vectors = contexts[0].vectors
    t0 = time.perf_counter()
    vectors.update_turn_narratives(save.save_id, {turn: texts[turn] for turn in sorted(texts)})
    seconds = time.perf_counter() - t0
    dropped = set()
    for ctx in live:
        try:
            ctx.check_timeline(save)
        except JobSkipped:
            dropped.add(ctx.job.pk)
    if dropped:
        vectors.rollback(save.save_id, save.current_turn)
    for ctx in live:
        if ctx.job.pk in dropped:
            outcomes[ctx.job.pk] = (
                JobStatus.SKIPPED,
                {"progress": "skipped: timeline rewound during embedding; the chunk was removed again"},
            )
            continue
        turn = ctx.job.turn_id
        outcomes[ctx.job.pk] = (
            JobStatus.DONE,
            {
                "progress": "done",
                "result": {
                    "turn_id": turn,
                    "chars": len(texts[turn]),
                    "batch": len(texts),
                    "timings": {"embed_seconds": round(seconds / len(texts), 4), "batch_embed_seconds": round(seconds, 4)},
                },
            },
        )
    return outcomes
