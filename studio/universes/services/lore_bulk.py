"""Writes for many lore entries at once: the Lore Book's bulk actions and the imports' bulk create.

`lore_bulk_delete`, `lore_bulk_set_kind` and `lore_bulk_set_activation` (the Lore Book's
selection toolbar) and `_lore_bulk_create` (the imports: batched INSERTs, links and revisions
in bulk). Each change records one `LoreRevision` per entry, as the single-entry writes of
lore.py do, with the same checks (lore.py's `_validate_entry_fields`, `known_by_validate`).
The embedding job is queued through `lore.schedule_lore_sync`, looked up on that module, so
the one place a test or a caller replaces it covers the bulk writes too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from studio.memory.embeddings.counting import text_counts_many
from studio.memory.lore.embedding_state import lore_embedding_state_set
from studio.universes.activation import activation_validate
from studio.universes.models import LoreRevision
from studio.world.models import EmbeddingState, LoreEntry, LoreKind, Universe
from studio.universes.selectors import with_link_ids
from studio.universes.services import lore
from studio.universes.services.lore import _apply_activation, _clean_keys, _validate_entry_fields, known_by_validate
from studio.universes.services.lore_links import _resolve_pending_links
from studio.universes.services.lore_rows import lore_entry_snapshot, lore_revision


@transaction.atomic
def lore_bulk_delete(*, universe: Universe, user, entry_ids: Sequence[str]) -> int:
    """Delete the chosen entries, each with a revision; return how many were deleted."""
    entries = list(universe.lore_entries.filter(entry_id__in=entry_ids).prefetch_related("links", "backlinks"))
    revisions = []
    for entry in entries:
        before = lore_entry_snapshot(entry)
        before["backlinks"] = sorted(e.entry_id for e in entry.backlinks.all())
        revisions.append(
            lore_revision(
                universe=universe,
                entry=None,
                entry_id=entry.entry_id,
                user=user,
                action=LoreRevision.Action.DELETE,
                before=before,
                after=None,
            )
        )
    LoreRevision.objects.bulk_create(revisions)
    universe.lore_entries.filter(pk__in=[e.pk for e in entries]).delete()
    if entries:
        lore.schedule_lore_sync(universe=universe)
    return len(entries)


def _lock_rows(universe: Universe, entry_ids: Sequence[str]) -> None:
    """Lock the chosen rows before a bulk change reads them (the read below adds aggregates,
    which PostgreSQL does not allow with FOR UPDATE). A bulk change touches only its own field
    of the current row and raises each version, so an editor open elsewhere sees a conflict."""
    list(universe.lore_entries.filter(entry_id__in=entry_ids).select_for_update().values_list("pk", flat=True))


@transaction.atomic
def lore_bulk_set_kind(*, universe: Universe, user, entry_ids: Sequence[str], kind: str) -> int:
    """Give the chosen entries one kind, each with a revision; return how many changed."""
    if kind not in LoreKind.values:
        raise ValidationError({"kind": f"Unknown kind “{kind}”."})
    _lock_rows(universe, entry_ids)
    entries = list(with_link_ids(universe.lore_entries.filter(entry_id__in=entry_ids).exclude(kind=kind)))
    revisions = []
    now = timezone.now()
    for entry in entries:
        before = lore_entry_snapshot(entry)
        entry.kind = kind
        entry.version += 1
        entry.updated_at = now  # bulk_update skips auto_now
        revisions.append(
            lore_revision(
                universe=universe,
                entry=entry,
                entry_id=entry.entry_id,
                user=user,
                action=LoreRevision.Action.UPDATE,
                before=before,
                after={**before, "kind": kind},
            )
        )
    LoreEntry.objects.bulk_update(entries, ["kind", "version", "updated_at"])
    LoreRevision.objects.bulk_create(revisions)
    return len(entries)


@transaction.atomic
def lore_bulk_set_activation(*, universe: Universe, user, entry_ids: Sequence[str], values: dict[str, Any]) -> int:
    """Give the chosen entries the same activation values, each with a revision; return how many changed."""
    values = activation_validate(values, strict_keys=True)
    if not values:
        return 0
    _lock_rows(universe, entry_ids)
    entries = list(with_link_ids(universe.lore_entries.filter(entry_id__in=entry_ids)))
    revisions, changed = [], []
    now = timezone.now()
    for entry in entries:
        before = lore_entry_snapshot(entry)
        _apply_activation(entry, values)
        after = lore_entry_snapshot(entry)
        if after == before:
            continue
        entry.version += 1
        entry.updated_at = now  # bulk_update skips auto_now
        changed.append(entry)
        revisions.append(
            lore_revision(
                universe=universe,
                entry=entry,
                entry_id=entry.entry_id,
                user=user,
                action=LoreRevision.Action.UPDATE,
                before=before,
                after=after,
            )
        )
    LoreEntry.objects.bulk_update(changed, [*values, "version", "updated_at"])
    LoreRevision.objects.bulk_create(revisions)
    return len(changed)


def _lore_bulk_create(
    *,
    universe: Universe,
    user,
    items: list[dict[str, Any]],
    links: dict[str, list[str]],
    known: dict[str, int],
    action: str,
) -> dict[str, LoreEntry]:
    """Create many entries at once (imports): batched INSERTs, links and revisions in bulk.

    `items` hold already-validated fields (entry_id, title, kind, text, keys, extensions);
    `links` maps a new entry's id to the ids it links to, resolved against `known` (existing
    entry id -> pk) and the new entries; unknown ids are left out. Return the new entries.
    """
    entries = []
    for item in items:
        _validate_entry_fields(title=item["title"], kind=item["kind"])
        entry = LoreEntry(
            universe=universe,
            entry_id=item["entry_id"],
            title=item["title"].strip(),
            kind=item["kind"],
            text=item["text"],
            keys=_clean_keys(item["keys"]),
            extensions=item.get("extensions") or {},
            known_by=known_by_validate(item.get("known_by")),
        )
        lore_embedding_state_set(entry, state=EmbeddingState.PENDING)
        _apply_activation(
            entry, activation_validate(item.get("activation") or {}, strict_keys=False, primary_keys=entry.keys)
        )
        entries.append(entry)
    if not entries:
        return {}
    for entry, (words, tokens) in zip(entries, text_counts_many([e.text for e in entries])):
        entry.word_count, entry.token_count = words, tokens
    LoreEntry.objects.bulk_create(entries, batch_size=500)
    pks = dict(universe.lore_entries.filter(entry_id__in=[e.entry_id for e in entries]).values_list("entry_id", "pk"))
    all_pks = {**known, **pks}
    through = LoreEntry.links.through
    link_rows, revisions = [], []
    for entry in entries:
        entry.pk = pks[entry.entry_id]
        targets = sorted({t for t in links.get(entry.entry_id) or [] if t in all_pks and t != entry.entry_id})
        link_rows.extend(through(from_loreentry_id=entry.pk, to_loreentry_id=all_pks[t]) for t in targets)
        revisions.append(
            lore_revision(
                universe=universe,
                entry=entry,
                entry_id=entry.entry_id,
                user=user,
                action=action,
                before=None,
                after=lore_entry_snapshot(entry, links=targets),
            )
        )
    through.objects.bulk_create(link_rows, batch_size=1000)
    LoreRevision.objects.bulk_create(revisions, batch_size=500)
    _resolve_pending_links(universe, entries, user)
    lore.schedule_lore_sync(universe=universe)
    return {entry.entry_id: entry for entry in entries}
