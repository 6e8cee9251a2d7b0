"""The Lore Book list costs a fixed number of queries, whatever the size of the book."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from studio.world.models import EmbeddingState, LoreEntry

pytestmark = pytest.mark.django_db

# session, user, the user's groups (role check), universe, paginator count, page rows,
# links and backlinks prefetches, book totals, pending count.
# (Rows without stored counts, written outside the services, add one query: their texts.)
LIST_QUERIES = 10


def grow(universe, n: int) -> None:
    # The fixture's two entries were written without the services, so have no stored counts;
    # give them counts so every size runs the same path (uncounted rows cost one more query).
    universe.lore_entries.update(word_count=4, token_count=7)
    entries = LoreEntry.objects.bulk_create(
        LoreEntry(
            universe=universe,
            entry_id=f"e{i:05d}",
            title=f"Entry {i:05d}",
            kind="place",
            text="word " * 20,
            word_count=20,
            token_count=20,
            embedding_state=EmbeddingState.EMBEDDED,
        )
        for i in range(n)
    )
    through = LoreEntry.links.through
    through.objects.bulk_create(
        through(from_loreentry_id=a.pk, to_loreentry_id=b.pk) for a, b in zip(entries, entries[1:])
    )


@pytest.mark.parametrize("size", [0, 30, 300])
def test_list_page_query_count_is_constant(author_client, universe, size, django_assert_num_queries):
    grow(universe, size)
    with django_assert_num_queries(LIST_QUERIES):
        response = author_client.get(f"/universes/{universe.slug}/lore/")
    assert response.status_code == 200
    assert response.content.decode().count('<tr id="lore-row-') == min(size + 2, 50)


def test_fragment_and_filtered_pages_also_constant(author_client, universe, django_assert_num_queries):
    grow(universe, 120)
    with django_assert_num_queries(LIST_QUERIES):
        author_client.get(
            f"/universes/{universe.slug}/lore/", {"q": "Entry", "page": 2, "sort": "-title"}, HTTP_HX_REQUEST="true"
        )


def test_status_poll_is_cheap(author_client, universe):
    grow(universe, 100)
    ids = list(universe.lore_entries.values_list("pk", flat=True)[:50])
    with CaptureQueriesContext(connection) as ctx:
        author_client.get(f"/universes/{universe.slug}/lore/status/", {"ids": ids}, HTTP_HX_REQUEST="true")
    assert len(ctx.captured_queries) <= 6
