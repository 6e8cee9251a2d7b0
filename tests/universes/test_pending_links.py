"""Links to entries not written yet are kept as pending and resolve when the entry appears."""

from __future__ import annotations

import pytest

from studio.universes import services
from studio.universes.interchange import IncomingBook, IncomingEntry
from studio.universes.lore_health import lore_health
from studio.universes.models import LoreRevision, PendingLoreLink

pytestmark = pytest.mark.django_db


def links_of(universe, entry_id):
    return sorted(universe.lore_entries.get(entry_id=entry_id).links.values_list("entry_id", flat=True))


def test_two_entries_that_link_to_each_other_need_no_second_pass(author_client, author, universe):
    response = author_client.post(
        f"/universes/{universe.slug}/lore/new/",
        {
            "new-title": "The Glass Bell",
            "new-kind": "item",
            "new-text": "It sings.",
            "new-links": "Ilya Voss\nPort Vey",
        },
    )
    assert response.status_code == 302
    assert links_of(universe, "the-glass-bell") == ["port-vey"]
    assert list(universe.pending_lore_links.values_list("name", flat=True)) == ["Ilya Voss"]
    detail = author_client.get(f"/universes/{universe.slug}/lore/the-glass-bell/").content.decode()
    assert "Ilya Voss" in detail and "pending" in detail
    health = lore_health(universe=universe)
    assert health.pending_links == [{"entry_id": "the-glass-bell", "title": "The Glass Bell", "name": "Ilya Voss"}]
    page = author_client.get(f"/universes/{universe.slug}/lore/health/").content.decode()
    assert 'id="health-pending"' in page and "“Ilya Voss”" in page and "?title=Ilya%20Voss" in page

    # Writing the other entry (any case) resolves the link, with a revision of the entry that wrote it.
    bell = universe.lore_entries.get(entry_id="the-glass-bell")
    version = bell.version
    author_client.post(
        f"/universes/{universe.slug}/lore/new/",
        {
            "new-title": "ilya voss",
            "new-kind": "character",
            "new-text": "An apprentice.",
            "new-links": "The Glass Bell",
        },
    )
    assert links_of(universe, "the-glass-bell") == ["ilya-voss", "port-vey"]
    assert links_of(universe, "ilya-voss") == ["the-glass-bell"]
    assert not universe.pending_lore_links.exists() and lore_health(universe=universe).pending_links == []
    bell.refresh_from_db()
    assert bell.version == version + 1
    revision = universe.lore_revisions.filter(entry_id="the-glass-bell").first()
    assert revision.action == LoreRevision.Action.UPDATE and revision.after["links"] == ["ilya-voss", "port-vey"]


def test_the_edit_form_keeps_pending_names_and_a_rename_resolves_them(author, universe):
    kael = universe.lore_entries.get(entry_id="kael")
    services.lore_entry_update(entry=kael, user=author, pending_links=["The Copper Hood"])
    from studio.universes.forms import LoreEntryForm

    assert "The Copper Hood" in LoreEntryForm(universe=universe, entry=kael).initial["links"]
    port = universe.lore_entries.get(entry_id="port-vey")
    services.lore_entry_update(entry=port, user=author, title="The Copper Hood")
    assert links_of(universe, "kael") == ["port-vey"]  # already linked: the pending name is simply gone
    services.lore_entry_update(entry=kael, user=author, pending_links=["Moonwell"])
    services.lore_import(
        universe=universe,
        user=author,
        book=IncomingBook(
            source="test", entries=[IncomingEntry(label="entry 1", title="Moonwell", text="A well.", keys=["well"])]
        ),
    )
    assert links_of(universe, "kael") == ["moonwell", "port-vey"] and not PendingLoreLink.objects.exists()


def test_self_links_and_duplicates_are_refused_or_folded(author_client, universe):
    response = author_client.post(
        f"/universes/{universe.slug}/lore/new/", {"new-title": "Moonwell", "new-kind": "place", "new-links": "Moonwell"}
    )
    assert response.status_code == 400 and "cannot link to itself" in response.content.decode()
    author_client.post(
        f"/universes/{universe.slug}/lore/new/",
        {"new-title": "Moonwell", "new-kind": "place", "new-links": "Tide Gate\ntide gate"},
    )
    assert list(universe.pending_lore_links.values_list("name", flat=True)) == ["Tide Gate"]


def _import_resolving(universe, author, count: int, tag: str) -> int:
    """Leave `count` entries each a pending link, import the entries they name; return the import's queries."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for i in range(count):
        services.lore_entry_create(
            universe=universe,
            user=author,
            title=f"{tag} source {i}",
            pending_links=[f"{tag} target {i}", f"{tag} target {(i + 1) % count}"],
        )
    book = IncomingBook(
        source="test",
        entries=[
            IncomingEntry(label=f"entry {i}", title=f"{tag} target {i}", text="A place.", keys=[f"{tag}{i}"])
            for i in range(count)
        ],
    )
    with CaptureQueriesContext(connection) as queries:
        services.lore_import(universe=universe, user=author, book=book)
    for i in range(count):
        assert links_of(universe, f"{tag.lower()}-source-{i}") == sorted(
            {f"{tag.lower()}-target-{i}", f"{tag.lower()}-target-{(i + 1) % count}"}
        )
    # The entries' INSERT is split by the database's parameter limit (SQLite: 999), not per entry.
    return len([q for q in queries if not q["sql"].startswith('INSERT INTO "universes_loreentry" ')])


def test_an_import_resolves_pending_links_in_a_constant_number_of_queries(author, universe):
    """Resolving costs the same queries for 3 sources as for 40 (it was about 6 per source)."""
    few = _import_resolving(universe, author, 3, "Few")
    many = _import_resolving(universe, author, 40, "Many")
    assert many == few
    assert not PendingLoreLink.objects.exists()
    source = universe.lore_entries.get(entry_id="many-source-7")
    revision = universe.lore_revisions.filter(entry_id="many-source-7").first()
    assert source.version == 2 and revision.action == LoreRevision.Action.UPDATE
    assert revision.before["links"] == [] and revision.after["links"] == ["many-target-7", "many-target-8"]
