"""The embedding state of Lore Book entries (`LoreEntry.embedding_state`): its one writer.

An entry is *pending* from the moment its embedded text (title, text, keys) changes or a
sync of its universe's own Lore Book is queued, *embedded* once a sync that started after
its last change succeeded, and *failed* (with the error kept in `embedding_error`) when
that sync failed or could not be queued. The lore services, the demo loader, the job
queue and the sync job all set it through `lore_embedding_state_set`, so the rule that an
error goes with the failed state (and is cleared otherwise) lives here only.
"""

from __future__ import annotations

from django.db.models import QuerySet

from studio.world.models import EmbeddingState, LoreEntry

ERROR_MAX_CHARS = 2000


def lore_embedding_state_set(entries: QuerySet[LoreEntry] | LoreEntry, *, state: str, error: str = "") -> int:
    """Set the embedding state of `entries`; return how many entries changed.

    `entries` is a queryset (updated in one statement, `updated_at` untouched, so a sync
    can still tell entries edited while it ran) or one unsaved-or-about-to-be-saved entry
    (its fields are set in memory; the caller saves it). `error` is kept only with
    `EmbeddingState.FAILED`.
    """
    if state not in EmbeddingState.values:
        raise ValueError(f"unknown embedding state {state!r}")
    error = (error or "")[:ERROR_MAX_CHARS] if state == EmbeddingState.FAILED else ""
    if isinstance(entries, LoreEntry):
        if entries.embedding_state == state and entries.embedding_error == error:
            return 0
        entries.embedding_state = state
        entries.embedding_error = error
        return 1
    return entries.exclude(embedding_state=state, embedding_error=error).update(
        embedding_state=state, embedding_error=error
    )
