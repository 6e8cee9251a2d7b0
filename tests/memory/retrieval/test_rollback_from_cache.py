"""A rollback takes the ids after the target turn from the process's corpus of the save when it keeps one, with the
change log since it, not from a `turn_id > N` scan of the store's metadata; the chunks another process wrote since
are deleted too, a rollback after a rollback needs no query between them, and without a cached corpus the store
lists them."""

from __future__ import annotations

import uuid

import chromadb
import pytest
from chromadb.config import Settings

from studio.memory.retrieval.changes import LocalCorpusVersions
from tests.fakes import make_vector_memory


@pytest.fixture
def shared():
    """Two memories on one store and one change log, as two processes of the studio are."""
    client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
    options = {"client": client, "collection_name": f"test_{uuid.uuid4().hex[:12]}", "versions": LocalCorpusVersions()}
    return make_vector_memory(**options), make_vector_memory(**options)


def turns_left(vm, save_id="s1") -> list[int]:
    return sorted(row["turn_id"] for row in vm.get_chunks(save_id))


def where_listings(vm, monkeypatch) -> list:
    calls = []
    real = vm.store.get_paged

    def spy(scope_id, where, include):
        calls.append(where)
        return real(scope_id, where, include)

    monkeypatch.setattr(vm.store, "get_paged", spy)
    return calls


def test_a_cached_corpus_names_the_chunks_to_delete(shared, monkeypatch):
    vm, _other = shared
    for turn in range(1, 9):
        vm.embed_chunk("s1", turn, f"Turn {turn}: Kaël walks the pier in the rain.")
    vm.sync_lore("s1", [{"entry_id": "kael", "text": "Kaël is a smuggler."}])
    vm.query("s1", "Kaël pier", k=3)  # the corpus is cached
    listings = where_listings(vm, monkeypatch)
    assert vm.rollback("s1", 5) == 3
    assert listings == []  # no scan of the store's metadata
    assert turns_left(vm) == [0, 1, 2, 3, 4, 5]
    assert vm.rollback("s1", 5) == 0
    assert vm.rollback("s1", 0) == 5 and turns_left(vm) == [0]  # lore (turn 0) survives


def test_chunks_another_process_wrote_since_are_deleted_too(shared, monkeypatch):
    vm, other = shared
    for turn in range(1, 5):
        vm.embed_chunk("s1", turn, f"Turn {turn}: the bell rings over Port Vey.")
    vm.query("s1", "bell", k=2)  # this process's corpus: turns 1-4
    other.embed_chunk("s1", 5, "Turn 5: Mira counts the coins.")  # another process writes
    other.embed_chunk("s1", 6, "Turn 6: the tide turns.")
    listings = where_listings(vm, monkeypatch)
    assert vm.rollback("s1", 3) == 3
    assert listings == [] and turns_left(vm) == [1, 2, 3]
    assert [r["turn_id"] for r in other.query("s1", "coins tide bell", k=10)] and turns_left(other) == [1, 2, 3]


def test_without_a_cached_corpus_the_store_lists_them(shared, monkeypatch):
    vm, other = shared
    for turn in range(1, 5):
        other.embed_chunk("s1", turn, f"Turn {turn}: fog on the harbour.")
    listings = where_listings(vm, monkeypatch)
    assert vm.rollback("s1", 2) == 2
    assert listings == [{"turn_id": {"$gt": 2}}] and turns_left(vm) == [1, 2]
