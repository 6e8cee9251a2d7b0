"""EMBED_TURN: a turn's narrative into the save's vector memory, one turn or a batch.

Only `VectorMemory`'s public API is used: `update_turn_narrative` for one turn and
`update_turn_narratives` for a batch (one encode call for all the turns, then their old
chunks deleted), both of which replace a turn's chunks, so an edit, a re-run after a crash
or a turn number reused after a rewind never duplicates. Chroma is outside the
transaction: after embedding, the job checks its turn is still on the live timeline
(`JobContext.check_timeline`: a rewind to the turn or later keeps it, and the job ends done);
if a rewind dropped the turn meanwhile the job repairs what it wrote and ends skipped
(`_undo_dropped`): it deletes whatever lies beyond the live horizon again, and when a new
turn with the same number was appended meanwhile (its chunks were just replaced by the
dropped turn's narrative) it embeds that live turn's narrative again, so the store ends
holding only the live turn's chunks (a dropped turn is never written, `jobs.timeline`).
"""

from __future__ import annotations

import time

from studio.memory.jobs import JobContext, JobSkipped, check_timelines
from studio.memory.models import JobStatus

# How many times a repair is redone when yet another rewind or edit lands during it.
REPAIR_ATTEMPTS = 3


def _live_state(save, turns: list[int]) -> tuple[int, int, dict[int, str]]:
    """The save's (generation, current turn) under its lock and the live narratives of `turns`
    ("" for a turn without an Event): what a repair writes and then checks is unchanged."""
    from django.db import transaction

    from studio.world.models import Event, Save

    with transaction.atomic():
        locked = Save.objects.select_for_update().only("timeline_generation", "current_turn").get(pk=save.pk)
        live = [turn for turn in turns if turn <= locked.current_turn]
        texts = dict(Event.objects.filter(game_save_id=save.pk, turn_id__in=live).values_list("turn_id", "narrative"))
    return locked.timeline_generation, locked.current_turn, {turn: texts.get(turn, "") for turn in live}


def _undo_dropped(save, vectors, turns: list[int]) -> list[int]:
    """Undo an embedding of `turns` that a rewind dropped while it was being written.

    The write is outside the transaction, so it may have landed after the rewind's own
    vector rollback: delete whatever lies beyond the live horizon again, and for each of
    `turns` whose number the live timeline uses again (a new turn appended after the
    rewind), whose chunks the write just replaced with the dropped turn's narrative, embed
    the live Event's narrative again. Redone while another rewind or an edit changes the
    state meanwhile (at most `REPAIR_ATTEMPTS` times; a later rewind rolls back itself and
    an edit queues its own embedding). Return the turns re-embedded.
    """
    state = _live_state(save, turns)
    for _ in range(REPAIR_ATTEMPTS):
        _generation, current_turn, texts = state
        vectors.rollback(save.save_id, current_turn)
        if texts:
            vectors.update_turn_narratives(save.save_id, texts)
        after = _live_state(save, turns)
        if after == state:
            break
        state = after
    return sorted(state[2])


def _dropped_progress(reembedded: list[int]) -> str:
    done = "timeline rewound during embedding; the chunk was removed again"
    if reembedded:
        return f"{done} and turn(s) {', '.join(map(str, reembedded))} of the live timeline embedded again"
    return done


def run_embed_turn(ctx: JobContext):
    """Embed (or re-embed) one turn's narrative into the save's vector memory."""
    from studio.world.models import Event

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
        # A rewind dropped the turn meanwhile and may have deleted chunks before these
        # landed, or a new turn took its number: undo the write (see `_undo_dropped`).
        raise JobSkipped(_dropped_progress(_undo_dropped(save, vectors, [event.turn_id]))) from None
    return {"turn_id": event.turn_id, "chars": len(event.narrative), "timings": {"embed_seconds": round(seconds, 4)}}


def run_embed_batch(contexts: list[JobContext]) -> dict[int, tuple[str, dict]]:
    """Embed several turns of one save with one model call; return each job's outcome.

    The outcome per job id is (status, {"progress", "result"}) for the runner to record in
    one transaction. Same checks as `run_embed_turn`: a job whose turn a rewind dropped, or
    of a turn that no longer exists, is skipped; a rewind during the embedding is undone
    (`_undo_dropped`: the chunks beyond the live horizon removed again, a reused turn number
    given its live narrative back) and skips the jobs of the turns it dropped (those of the
    turns it kept end done).
    """
    from studio.world.models import Event

    save = contexts[0].save()
    outcomes: dict[int, tuple[str, dict]] = {}
    live: list[JobContext] = []
    skipped = check_timelines(contexts, save)
    for ctx in contexts:
        if ctx.job.pk in skipped:
            outcomes[ctx.job.pk] = (JobStatus.SKIPPED, {"progress": f"skipped: {skipped[ctx.job.pk]}"})
            continue
        live.append(ctx)
    texts = dict(
        Event.objects.filter(game_save_id=save.pk, turn_id__in={ctx.job.turn_id for ctx in live}).values_list(
            "turn_id", "narrative"
        )
    )
    for ctx in list(live):
        if ctx.job.turn_id not in texts:
            outcomes[ctx.job.pk] = (
                JobStatus.SKIPPED,
                {"progress": f"skipped: turn {ctx.job.turn_id} no longer exists"},
            )
            live.remove(ctx)
    if not live:
        return outcomes
    vectors = contexts[0].vectors
    t0 = time.perf_counter()
    vectors.update_turn_narratives(save.save_id, {turn: texts[turn] for turn in sorted(texts)})
    seconds = time.perf_counter() - t0
    gone = check_timelines(live, save)
    dropped = {ctx.job.pk: ctx.job.turn_id for ctx in live if ctx.job.pk in gone}
    reembedded = _undo_dropped(save, vectors, sorted(set(dropped.values()))) if dropped else []
    for ctx in live:
        if ctx.job.pk in dropped:
            outcomes[ctx.job.pk] = (JobStatus.SKIPPED, {"progress": f"skipped: {_dropped_progress(reembedded)}"})
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
                    "timings": {
                        "embed_seconds": round(seconds / len(texts), 4),
                        "batch_embed_seconds": round(seconds, 4),
                    },
                },
            },
        )
    return outcomes
