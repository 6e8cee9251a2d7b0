"""Concurrent lore edits lose nothing: the version check runs in the service, under the row lock."""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from studio.universes import lore_merge, services
from studio.universes.models import LoreRevision
from studio.world.models import LoreEntry

pytestmark = pytest.mark.django_db


def fresh(entry_id="kael") -> LoreEntry:
    return LoreEntry.objects.get(entry_id=entry_id)


def test_every_write_raises_the_version(universe, author, sync_calls):
    entry = fresh()
    assert entry.version == 1
    services.lore_entry_update(entry=entry, user=author, text="One.", base_version=1)
    assert fresh().version == 2
    services.lore_bulk_set_kind(universe=universe, user=author, entry_ids=["kael"], kind="place")
    services.lore_bulk_set_activation(universe=universe, user=author, entry_ids=["kael"], values={"enabled": False})
    assert fresh().version == 4
    assert services.lore_entry_update(entry=fresh(), user=author, text="One.", base_version=4) == []
    assert fresh().version == 4  # nothing changed, nothing written


def test_saving_over_a_newer_version_raises_and_writes_nothing(universe, author, sync_calls):
    mine = fresh()  # the author opened the editor at version 1
    services.lore_entry_update(
        entry=fresh(), user=author, text="Theirs: Kaël owes the harbour master.", keys=["Kael"], base_version=1
    )
    revisions = LoreRevision.objects.count()
    with pytest.raises(services.LoreEditConflict) as info:
        services.lore_entry_update(
            entry=mine, user=author, text="Mine: Kaël is a smuggler and a liar.", title="Kaël the Liar", base_version=1
        )
    conflict = info.value
    assert (conflict.base_version, conflict.current_version) == (1, 2)
    assert conflict.theirs["text"] == "Theirs: Kaël owes the harbour master."
    assert conflict.mine["text"] == "Mine: Kaël is a smuggler and a liar."
    assert conflict.mine["keys"] == ["Kael"]  # what the author did not touch is theirs
    assert set(conflict.fields) == {"text", "title"}
    assert conflict.changed_by == "author"
    stored = fresh()
    assert (stored.text, stored.title, stored.version) == ("Theirs: Kaël owes the harbour master.", "Kaël", 2)
    assert LoreRevision.objects.count() == revisions
    # The stale object was brought up to date, so "keep theirs" shows what is saved.
    assert mine.text == stored.text and mine.version == 2


def test_the_check_reads_the_row_not_the_callers_object(universe, author, sync_calls):
    """A caller holding an up-to-date-looking object still cannot save over a newer row."""
    stale = fresh()
    LoreEntry.objects.filter(pk=stale.pk).update(version=5, text="Saved elsewhere.")
    with pytest.raises(services.LoreEditConflict):
        services.lore_entry_update(entry=stale, user=author, text="Mine.", base_version=stale.version)
    assert fresh().text == "Saved elsewhere."


def test_overwrite_after_a_conflict_is_an_edit_based_on_the_new_version(universe, author, sync_calls):
    services.lore_entry_update(entry=fresh(), user=author, text="Theirs.", base_version=1)
    with pytest.raises(services.LoreEditConflict) as info:
        services.lore_entry_update(entry=fresh(), user=author, text="Mine.", base_version=1)
    services.lore_entry_update(entry=fresh(), user=author, text="Mine.", base_version=info.value.current_version)
    assert (fresh().text, fresh().version) == ("Mine.", 3)
    # Both texts are in the history: nothing was lost.
    texts = [r.after["text"] for r in LoreRevision.objects.filter(entry_id="kael").order_by("pk") if r.after]
    assert texts[-2:] == ["Theirs.", "Mine."]


def test_a_write_without_a_base_version_is_not_checked(universe, author, sync_calls):
    services.lore_entry_update(entry=fresh(), user=author, text="A.")
    services.lore_entry_update(entry=fresh(), user=author, text="B.")  # restores and imports
    assert fresh().version == 3


@pytest.mark.django_db(transaction=True)
def test_two_saves_from_the_same_version_at_once_save_one(universe, author, sync_calls):
    """Two requests made from the same form, in two threads: one saves, the other gets both texts."""
    barrier = threading.Barrier(2)
    outcomes: dict[str, object] = {}

    def submit(text):
        try:
            entry = fresh()
            barrier.wait(timeout=10)
            services.lore_entry_update(entry=entry, user=author, text=text, base_version=1)
            outcomes[text] = "saved"
        except services.LoreEditConflict as conflict:
            outcomes[text] = conflict
        finally:
            connections.close_all()

    threads = [threading.Thread(target=submit, args=(f"Version from editor {n}.",)) for n in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    saved = [text for text, outcome in outcomes.items() if outcome == "saved"]
    lost = [(text, outcome) for text, outcome in outcomes.items() if outcome != "saved"]
    assert len(saved) == 1 and len(lost) == 1
    text, conflict = lost[0]
    assert isinstance(conflict, services.LoreEditConflict)
    assert conflict.theirs["text"] == saved[0] and conflict.mine["text"] == text
    stored = fresh()
    assert (stored.text, stored.version) == (saved[0], 2)


def test_merge_keeps_both_sides_of_every_difference():
    theirs = "Kaël is a smuggler.\nHe owes the harbour master.\nHe sails at dawn."
    mine = "Kaël is a smuggler.\nHe fears the Copper Hood.\nHe sails at dawn."
    merged = lore_merge.merge_texts(theirs, mine)
    assert merged.splitlines() == [
        "Kaël is a smuggler.",
        lore_merge.THEIRS_MARK,
        "He owes the harbour master.",
        lore_merge.SPLIT_MARK,
        "He fears the Copper Hood.",
        lore_merge.MINE_MARK,
        "He sails at dawn.",
    ]
    assert [row["tag"] for row in lore_merge.diff_lines(theirs, mine)] == ["same", "theirs", "mine", "same"]
    assert lore_merge.merge_texts("Same.", "Same.") == "Same."
