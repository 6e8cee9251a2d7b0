"""What every writer of a lore entry records with it: the snapshot a revision keeps, the revision
row, and the entry's word and token counts.

The Lore Book's services (lore.py, lore_links.py, the imports) and the demo loader
(universes/demo/loader.py) all write entries through these, so a revision holds the same fields
(known_by and every activation field included) whichever path wrote it, and a field added to
the snapshot reaches every path at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from studio.memory.embeddings.counting import text_counts
from studio.universes.activation import activation_values
from studio.universes.models import LoreRevision
from studio.world.models import LoreEntry, Universe


def lore_entry_snapshot(entry: LoreEntry, *, links: Sequence[str] | None = None) -> dict[str, Any]:
    """Return the state a revision keeps: every field an author can change."""
    if links is None:
        links = [link.entry_id for link in entry.links.all()]
    return {
        "entry_id": entry.entry_id,
        "title": entry.title,
        "kind": entry.kind,
        "text": entry.text,
        "keys": list(entry.keys or []),
        "links": sorted(links),
        "extensions": entry.extensions or {},
        "known_by": list(entry.known_by) if entry.known_by is not None else None,
        **activation_values(entry),
    }


def lore_revision(
    *,
    universe: Universe,
    entry: LoreEntry | None,
    entry_id: str,
    user,
    action: str,
    before: dict | None,
    after: dict | None,
) -> LoreRevision:
    """Return an unsaved revision of `entry_id` (`before` / `after`: snapshots, None on a create /
    delete); `user` is its author when logged in (the demo loader and management commands have none)."""
    return LoreRevision(
        universe=universe,
        lore_entry=entry,
        entry_id=entry_id,
        action=action,
        before=before,
        after=after,
        author=user if getattr(user, "is_authenticated", False) else None,
    )


def lore_counts_apply(entry: LoreEntry) -> None:
    """Set the entry's word and token counts from its text (unsaved)."""
    entry.word_count, entry.token_count = text_counts(entry.text)
