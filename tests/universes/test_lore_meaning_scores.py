"""Meaning search in the Lore Book shows each entry's rank, fused score and cosine distance
(issue 15: meaning-search scores), full page and htmx fragment, as the engine gave them."""

from __future__ import annotations

import re

import pytest


pytestmark = pytest.mark.django_db


def test_meaning_search_rows_show_the_engines_scores(author_client, universe, vector_memory):
    entries = [{"entry_id": e.entry_id, "text": e.text, "title": e.title} for e in universe.lore_entries.all()]
    vector_memory.sync_lore(universe.lore_scope_id, entries)
    query = "harbour town smuggler"
    expected: dict[str, dict] = {}
    for hit in vector_memory.query(universe.lore_scope_id, query, k=20, chunk_type="lore"):
        expected.setdefault(
            hit["entry_id"], {"rank": len(expected) + 1, "score": hit["score"], "distance": hit["distance"]}
        )
    assert len(expected) == 2
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        html = author_client.get(
            f"/universes/{universe.slug}/lore/", {"q": query, "mode": "semantic"}, **headers
        ).content.decode()
        rows = re.findall(
            r'name="entries" value="([^"]+)".*?<div class="muted small meaning-score" data-rank="(\d+)">(.*?)</div>',
            html,
            re.S,
        )
        assert [entry_id for entry_id, _, _ in rows] == list(expected)
        for entry_id, rank, text in rows:
            want = expected[entry_id]
            assert int(rank) == want["rank"] and f"meaning #{want['rank']} · score {want['score']:.4f}" in text
            if want["distance"] is None:
                assert "matched by its words only" in text
            else:
                assert f"cosine distance {want['distance']:.3f}" in text
    # A word search shows no meaning scores.
    words = author_client.get(f"/universes/{universe.slug}/lore/", {"q": "harbour"}).content.decode()
    assert "meaning-score" not in words and "Port Vey" in words
