"""The corpus change log: a cache reads what another writer changed from the log, never by listing the save.

Two VectorMemory instances over one Chroma client and one database stand for two processes: each
has its own corpus cache, and the versions and change log are the database's
(`studio.memory.corpus_log.DatabaseCorpusVersions`).
"""

from __future__ import annotations

import pytest

from studio.memory.corpus_log import DatabaseCorpusVersions
from studio.memory.models import VectorCorpusChange
from studio.memory.retrieval.changes import LOG_KEEP, CorpusChange, LocalCorpusVersions, fold
from studio.memory.vector import RetrievalConfig, VectorMemory
from tests.fakes import HashingEmbedder

TURNS = ["Kaël docks at Port Vey at dawn.", "Mira asks who carries the old key.", "The Bellwright keeps the key."]


@pytest.fixture
def pair(vm, embedder):
    """(writer, reader): two caches over one store and one database."""
    reader = VectorMemory(None, client=vm._client, embedder=embedder)
    vm.embed_chunks("s", [{"turn_id": n, "text": text} for n, text in enumerate(TURNS, start=1)])
    reader.query("s", "key", k=2)  # the reader's first load lists the save once
    return vm, reader


def no_listing(memory, monkeypatch):
    calls = []
    real = memory.store.get_paged
    monkeypatch.setattr(memory.store, "get_paged", lambda *a, **k: calls.append(a) or real(*a, **k))
    return calls


def corpus_ids(memory, scope="s"):
    return memory._corpora.read(scope, RetrievalConfig()).corpus.ids


def test_an_append_elsewhere_is_fetched_by_id(pair, monkeypatch):
    writer, reader = pair
    listed = no_listing(reader, monkeypatch)
    new_id = writer.embed_chunk("s", 4, "A storm batters the lighthouse.")
    hits = reader.query("s", "storm lighthouse", k=1)
    assert hits[0]["id"] == new_id and hits[0]["turn_id"] == 4
    assert reader.last_query_stats.corpus_rebuilt
    assert listed == [], "the reader listed the save's ids instead of reading the change log"
    read = reader._corpora.read("s", RetrievalConfig())
    assert read.corpus.delta.added_ids == (new_id,) and read.corpus.delta.removed == 0


def test_a_rewind_elsewhere_removes_exactly_the_rewound_chunks(pair, monkeypatch):
    writer, reader = pair
    listed = no_listing(reader, monkeypatch)
    writer.rollback("s", 1)
    assert [hit["turn_id"] for hit in reader.query("s", "key Bellwright Mira", k=5)] == [1]
    assert listed == []
    assert corpus_ids(reader) == corpus_ids(VectorMemory(None, client=writer._client, embedder=HashingEmbedder()))
    # A narrative replaced in place (a removal in the middle, then an add) is read from the log too.
    writer.embed_chunks("s", [{"turn_id": 2, "text": "Mira finds the key under the bell."}])
    old = writer.get_chunks("s", max_turn_id=1)[0]["id"]
    writer.update_turn_narrative("s", 1, "Kaël sails into Port Vey at night.")
    assert {hit["text"] for hit in reader.query("s", "Kaël Port Vey night", k=5)} == {
        "Kaël sails into Port Vey at night.",
        "Mira finds the key under the bell.",
    }
    assert old not in corpus_ids(reader)
    assert listed == []


def test_a_write_that_names_no_change_lists_the_ids_once(pair, monkeypatch):
    writer, reader = pair
    listed = no_listing(reader, monkeypatch)
    collection = writer.collection_for("s")
    vector = HashingEmbedder().encode(["The lantern of the zephyr tower burns blue."])[0]
    collection.add(
        ids=["outside"],
        embeddings=[vector],
        documents=["The lantern of the zephyr tower burns blue."],
        metadatas=[{"save_id": "s", "turn_id": 4, "chunk_type": "narrative", "chunk_seq": 9}],
    )
    writer.note_external_write("s")  # no ids: a gap in the log
    assert reader.query("s", "zephyr lantern", k=1)[0]["id"] == "outside"
    assert len(listed) == 1
    writer.note_external_write("s", removed=["outside"])
    collection.delete(ids=["outside"])
    assert all(hit["id"] != "outside" for hit in reader.query("s", "zephyr lantern", k=5))
    assert len(listed) == 1, "a write that named its chunks was read from the log"


def test_the_database_log_answers_the_whole_window_or_nothing(db):
    versions = DatabaseCorpusVersions()
    assert versions.bump("x", CorpusChange(added=("a", "b"))) == 1
    assert versions.bump("x", CorpusChange(removed=("a",))) == 2
    assert versions.changes_since("x", 0, 2) == [CorpusChange(("a", "b"), ()), CorpusChange((), ("a",))]
    assert versions.changes_since("x", 1, 2) == [CorpusChange((), ("a",))]
    assert versions.changes_since("x", 2, 2) == []
    versions.bump("x")  # a bump naming nothing: version 3 has no row
    versions.bump("x", CorpusChange(added=("c",)))
    assert versions.changes_since("x", 1, 4) is None and versions.changes_since("x", 3, 4) == [CorpusChange(("c",), ())]
    assert versions.changes_since("x", 0, LOG_KEEP + 1) is None  # further back than the log keeps
    assert VectorCorpusChange.objects.filter(scope_id="x").count() == 3


def test_the_log_is_pruned_to_what_a_cache_may_still_ask(db):
    versions = DatabaseCorpusVersions()
    for n in range(LOG_KEEP + 200):
        versions.bump("y", CorpusChange(added=(f"c{n}",)))
    current = versions.current("y")
    assert VectorCorpusChange.objects.filter(scope_id="y").count() <= LOG_KEEP + 128
    assert versions.changes_since("y", current - LOG_KEEP, current) is not None


def test_an_id_added_and_removed_in_one_window_cancels_out():
    known = {"old": 0, "gone": 1}
    changes = [CorpusChange(added=("n1", "n2")), CorpusChange(removed=("n1", "gone")), CorpusChange(removed=("never",))]
    assert fold(changes, known) == (["n2"], {"gone"})
    local = LocalCorpusVersions()
    local.bump("z", CorpusChange(added=("a",)))
    local.bump("z")
    local.bump("z", CorpusChange(added=("b",)))
    assert local.changes_since("z", 0, 3) is None and local.changes_since("z", 2, 3) == [CorpusChange(("b",), ())]
