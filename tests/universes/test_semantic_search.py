"""Semantic Lore Book search through the real engine (MiniLM embeddings, embedded Chroma)."""

from __future__ import annotations

import re

import pytest

from studio.universes import services

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


@pytest.fixture
def engine(settings, tmp_path):
    from studio.memory.vector import get_vector_memory, reset_vector_memory

    settings.CHROMA_HOST = ""
    settings.CHROMA_PATH = str(tmp_path / "chroma")
    settings.AXIOM_RERANKER_MODEL = ""
    reset_vector_memory()
    yield get_vector_memory()
    reset_vector_memory()


def test_meaning_search_ranks_by_the_engine(author_client, author, universe, engine):
    services.lore_entry_create(
        universe=universe,
        user=author,
        title="The Salt Guild",
        kind="faction",
        text="Merchants who control the price of salt and spices in every market.",
    )
    services.lore_entry_create(
        universe=universe,
        user=author,
        title="Old Lighthouse",
        kind="place",
        text="A tower with a great lamp that guides ships past the reef at night.",
    )
    entries = [{"entry_id": e.entry_id, "text": e.text, "title": e.title} for e in universe.lore_entries.all()]
    assert engine.sync_lore(universe.lore_scope_id, entries) == 4
    query = "a beacon warning sailors"
    expected = []
    for hit in engine.query(universe.lore_scope_id, query, k=20, chunk_type="lore"):
        if hit["entry_id"] not in expected:
            expected.append(hit["entry_id"])
    html = author_client.get(f"/universes/{universe.slug}/lore/", {"q": query, "mode": "semantic"}).content.decode()
    assert re.findall(r'name="entries" value="([^"]+)"', html) == expected  # the engine's order
    assert "old-lighthouse" in expected[:2] and "closest entries by meaning" in html
    html = author_client.get(
        f"/universes/{universe.slug}/lore/",
        {"q": "who sets prices for trade goods", "mode": "semantic", "kind": "faction"},
    ).content.decode()
    assert re.findall(r'name="entries" value="([^"]+)"', html) == ["the-salt-guild"]
