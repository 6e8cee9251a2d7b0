"""Exact search for a filter that keeps few chunks of a long save: the same hits as Chroma's filtered query,
without asking Chroma to scan its metadata (`retrieval/exact.py`)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from studio.memory.retrieval.config import RetrievalConfig

LORE = [
    {"entry_id": f"e{n}", "title": title, "text": text}
    for n, (title, text) in enumerate(
        [
            ("Port Vey", "Port Vey is a harbour town of smugglers and fog."),
            ("Mira", "Mira keeps the ledger of debts at the chapel."),
            ("The Bellwright", "The Bellwright rings the storm bell and keeps the old key."),
            ("Kaël", "Kaël is a smuggler who owes Mira a debt."),
            ("The reef", "The reef wrecks boats that sail without a lantern."),
        ]
    )
]


@pytest.fixture
def long_save(local_vm):
    words = "tide rope salt gull cellar wax seal bridge mill market rain oar net eel".split()
    local_vm.embed_chunks(
        "s",
        [
            {"turn_id": n, "text": f"Turn {n}: the {words[n % 14]} and the {words[(n * 5) % 14]}."}
            for n in range(1, 301)
        ],
    )
    local_vm.sync_lore("s", LORE)
    return local_vm


QUERIES = ("who keeps the key of the storm bell", "debts and the ledger", "fog over the harbour")


def reference(memory, query: str) -> dict[str, float]:
    """Every lore entry's cosine distance to the query, from the stored vectors, by brute force here."""
    stored = memory.collection_for("s").get(where={"chunk_type": "lore"}, include=["embeddings", "metadatas"])
    vector = np.asarray(memory._get_embedder().encode([query])[0], dtype=np.float64)
    out = {}
    for metadata, embedding in zip(stored["metadatas"], stored["embeddings"]):
        embedding = np.asarray(embedding, dtype=np.float64)
        out[metadata["entry_id"]] = round(
            1 - float(embedding @ vector) / (np.linalg.norm(embedding) * np.linalg.norm(vector)), 4
        )
    return out


def test_a_few_lore_chunks_among_many_are_searched_exactly(long_save, monkeypatch):
    # Chroma's filtered HNSW query on 5 chunks of 305 was seen to leave some out: the index is the wrong tool.
    config = dataclasses.replace(RetrievalConfig(), unfiltered_fetch_max=0)
    long_save.set_config(config)
    asked = []
    real = long_save.store.nearest
    monkeypatch.setattr(long_save.store, "nearest", lambda *a, **k: asked.append(a[2]) or real(*a, **k))
    for query in QUERIES:
        found = long_save.query_explained("s", query, k=5, chunk_type="lore")
        distances = {h["entry_id"]: round(h["distance"], 4) for h in found.results}
        assert distances == reference(long_save, query)
        ranked = sorted(found.results, key=lambda h: h["explain"]["semantic_rank"])
        assert [h["distance"] for h in ranked] == sorted(h["distance"] for h in found.results)
    assert asked == []  # never Chroma's filtered query
    # The vectors were fetched once and are carried to the next corpus.
    corpus = long_save._corpora.read("s", config).corpus
    assert {corpus.metadatas[corpus.position[i]]["entry_id"] for i in corpus.vectors} == {e["entry_id"] for e in LORE}
    long_save.embed_chunk("s", 301, "A storm rises over the reef.")
    assert set(long_save._corpora.read("s", config).corpus.vectors) == set(corpus.vectors)
    # Past `exact_search_max` the filter goes to Chroma.
    long_save.set_config(dataclasses.replace(config, exact_search_max=4))
    long_save.query("s", QUERIES[0], k=3, chunk_type="lore")
    assert asked == [{"chunk_type": "lore"}]


def test_a_filter_excluding_a_few_chunks_is_applied_after_an_unfiltered_query(long_save, monkeypatch):
    config = RetrievalConfig()
    long_save.set_config(config)
    asked = []
    real = long_save.store.nearest
    monkeypatch.setattr(long_save.store, "nearest", lambda *a, **k: asked.append((a[2], a[3])) or real(*a, **k))
    results = long_save.query("s", "the lantern on the reef", k=3, exclude_chunk_type="lore")
    assert results and all(r["chunk_type"] == "narrative" for r in results)
    assert asked == [(None, config.arm_depth + len(LORE))]
