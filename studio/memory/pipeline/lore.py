"""SYNC_LORE: embed a Lore Book into the vector store.

A universe's job embeds its own Lore Book under `universe.lore_scope_id`, marks its entries
embedded (or failed, with the error) - only those not edited since the job started, whose
own sync is queued - and queues one sync per save of the universe. A save's job embeds that
save's lore. `VectorMemory.sync_lore` is idempotent, so a re-run changes nothing more.
"""

from __future__ import annotations

import time

from django.utils import timezone

from studio.memory.lore import embedding_state
from studio.memory.jobs import JobContext, enqueue_sync_lore


def _lore_entries(universe_id: int) -> list[dict]:
    from studio.world.models import LoreEntry

    entries = []
    for entry in LoreEntry.objects.filter(universe_id=universe_id).prefetch_related("links").order_by("pk"):
        entries.append(
            {
                "entry_id": entry.entry_id,
                "title": entry.title,
                "text": entry.text,
                "links": [link.entry_id for link in entry.links.all()],
            }
        )
    return entries


def sync_lore_not_queued(job, error: str) -> None:
    """A universe's lore sync could not be queued: its pending entries are failed, with why."""
    from studio.world.models import EmbeddingState, LoreEntry

    if job.game_save_id is not None:  # a save's sync marks no entry
        return
    embedding_state.lore_embedding_state_set(
        LoreEntry.objects.filter(universe_id=job.universe_id, embedding_state=EmbeddingState.PENDING),
        state=EmbeddingState.FAILED,
        error=error,
    )


def run_sync_lore(ctx: JobContext):
    """Embed a Lore Book: a universe's own (then queue each save's), or one save's."""
    from studio.world.models import EmbeddingState, LoreEntry, Save, Universe

    job = ctx.job
    started_at = timezone.now()
    entries = _lore_entries(job.universe_id)
    save = ctx.save()
    scope_id = save.save_id if save is not None else Universe.objects.get(pk=job.universe_id).lore_scope_id
    # Entries edited while this runs keep "pending": their own sync job is queued.
    unchanged_since_start = LoreEntry.objects.filter(universe_id=job.universe_id, updated_at__lte=started_at)
    ctx.progress(f"embedding {len(entries)} lore entries", force=True)
    t0 = time.perf_counter()
    try:
        embedded = ctx.vectors.sync_lore(scope_id, entries)
    except Exception as exc:
        if save is None:
            embedding_state.lore_embedding_state_set(
                unchanged_since_start, state=EmbeddingState.FAILED, error=f"{exc.__class__.__name__}: {exc}"
            )
        raise
    ctx.timings["embed_seconds"] = round(time.perf_counter() - t0, 4)

    def write(_save):
        result = {"scope_id": scope_id, "entries": len(entries), "embedded": embedded}
        if save is None:
            embedding_state.lore_embedding_state_set(unchanged_since_start, state=EmbeddingState.EMBEDDED)
            queued = [enqueue_sync_lore(game_save=s).pk for s in Save.objects.filter(universe_id=job.universe_id)]
            result["save_jobs"] = queued
        return result

    ctx.commit(write, check_timeline=False)
    return None
