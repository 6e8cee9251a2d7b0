"""Pending links: a link to an entry not written yet, kept by name until the entry appears.

A link to a title or id the Lore Book does not hold yet is kept as a `PendingLoreLink` and
becomes a real link, with a revision of the entry that wrote it, when an entry with that title
or id appears (created, renamed, imported or restored: `_resolve_pending_links`), so entries
that link to each other need no create-then-edit pass.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.utils import timezone

from studio.universes.models import LoreRevision, PendingLoreLink
from studio.world.models import LoreEntry, Universe
from studio.universes.selectors import with_link_ids
from studio.universes.services.lore_rows import lore_entry_snapshot, lore_revision


def _set_pending_links(entry: LoreEntry, names: Sequence[str]) -> bool:
    """Make `names` the entry's pending links (its own title and id left out); return whether they changed."""
    own = {entry.title.casefold(), entry.entry_id.casefold()}
    wanted: dict[str, str] = {}
    for name in names:
        name = " ".join(str(name).split())[:300]
        if name and name.casefold() not in own:
            wanted.setdefault(name.casefold(), name)
    current = dict(entry.pending_links.values_list("name_key", "name"))
    if current == wanted:
        return False
    entry.pending_links.exclude(name_key__in=list(wanted)).delete()
    PendingLoreLink.objects.bulk_create(
        PendingLoreLink(universe_id=entry.universe_id, source=entry, name=name, name_key=key)
        for key, name in wanted.items()
        if key not in current
    )
    return True


def _resolve_pending_links(universe: Universe, targets: Sequence[LoreEntry], user) -> int:
    """Turn the links left pending for `targets`' titles or ids into links; return how many.

    Each source entry that gains a link records a revision (the link is an edit of that
    entry, made for its author when the target appeared) and its version goes up by one.
    Done in bulk: a constant number of queries however many entries an import resolves.
    """
    by_key: dict[str, LoreEntry] = {}
    for target in targets:
        by_key.setdefault(target.title.casefold(), target)
        by_key.setdefault(target.entry_id.casefold(), target)
    rows = list(
        PendingLoreLink.objects.filter(universe=universe, name_key__in=list(by_key))
        .order_by("source_id", "id")
        .values_list("pk", "source_id", "name_key")
    )
    if not rows:
        return 0
    PendingLoreLink.objects.filter(pk__in=[pk for pk, _source, _key in rows]).delete()
    wanted: dict[int, dict[int, LoreEntry]] = {}
    for _pk, source_id, key in rows:
        wanted.setdefault(source_id, {}).setdefault(by_key[key].pk, by_key[key])
    # Lock the sources' rows (as `_lock_current` does for one) and read them with their links.
    sources = with_link_ids(LoreEntry.objects.select_for_update().filter(pk__in=list(wanted)).order_by("pk"))
    through, now = LoreEntry.links.through, timezone.now()
    link_rows, changed, revisions = [], [], []
    for source in sources:
        before = lore_entry_snapshot(source)
        new = [t for t in wanted[source.pk].values() if t.pk != source.pk and t.entry_id not in before["links"]]
        if not new:
            continue
        link_rows.extend(through(from_loreentry_id=source.pk, to_loreentry_id=t.pk) for t in new)
        source.version += 1
        source.updated_at = now  # bulk_update skips auto_now
        changed.append(source)
        revisions.append(
            lore_revision(
                universe=universe,
                entry=source,
                entry_id=source.entry_id,
                user=user,
                action=LoreRevision.Action.UPDATE,
                before=before,
                after={**before, "links": sorted([*before["links"], *(t.entry_id for t in new)])},
            )
        )
    through.objects.bulk_create(link_rows, batch_size=1000)
    LoreEntry.objects.bulk_update(changed, ["version", "updated_at"], batch_size=500)
    LoreRevision.objects.bulk_create(revisions, batch_size=500)
    return len(link_rows)
