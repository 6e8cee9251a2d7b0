"""The demo loader records its Lore Book revisions as every Lore Book writer does.

A revision keeps the whole entry (`lore_entry_snapshot`: known_by and every activation field
included); the demo loader once kept a copy of an older snapshot without them, so restoring a
demo revision left an author's later secrecy and activation settings in place.
"""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from studio.universes import services
from studio.universes.activation import NAMES, STUDIO_DEFAULTS
from studio.universes.models import LoreRevision
from studio.world.models import LoreEntry, Universe

pytestmark = pytest.mark.django_db

SLUG = "the-drowned-reach"


def load() -> None:
    call_command("load_demo", "--no-knowledge", "--no-embed", stdout=io.StringIO())


def test_every_demo_revision_is_the_entry_as_the_services_snapshot_it():
    load()
    universe = Universe.objects.get(slug=SLUG)
    entries = {entry.entry_id: entry for entry in universe.lore_entries.prefetch_related("links")}
    revisions = list(LoreRevision.objects.filter(universe=universe))
    assert len(revisions) == len(entries) >= 25
    for revision in revisions:
        assert revision.action == LoreRevision.Action.IMPORT and revision.before is None
        assert revision.after == services.lore_entry_snapshot(entries[revision.entry_id]), revision.entry_id
        assert revision.after["known_by"] is None and {name: revision.after[name] for name in NAMES} == STUDIO_DEFAULTS


def test_a_reload_records_the_author_s_known_by_and_activation_and_a_restore_brings_the_demo_back(author):
    load()
    entry = LoreEntry.objects.get(universe__slug=SLUG, entry_id="hesper-vale")
    imported = LoreRevision.objects.get(lore_entry=entry)
    services.lore_entry_update(
        entry=entry, user=author, text="Someone rewrote this.", known_by=["Mira"], activation={"sticky": 3}
    )

    load()  # the files' text comes back; who knows the entry and its timing are the author's

    entry.refresh_from_db()
    reload = LoreRevision.objects.filter(lore_entry=entry).latest("pk")
    assert reload.action == LoreRevision.Action.IMPORT and reload.before["text"] == "Someone rewrote this."
    assert reload.before["known_by"] == reload.after["known_by"] == ["Mira"] == entry.known_by
    assert reload.before["sticky"] == reload.after["sticky"] == 3 == entry.sticky
    assert reload.after == services.lore_entry_snapshot(entry)

    services.lore_entry_restore(revision=imported, user=author)

    entry.refresh_from_db()
    assert entry.known_by is None and entry.sticky == STUDIO_DEFAULTS["sticky"]
