"""One Chroma collection per scope: naming, isolation between saves, legacy migration."""

from __future__ import annotations

import re

import numpy as np
import pytest

from studio.memory.vector import (
    COLLECTION_NAME,
    LocalCorpusVersions,
    VectorMemory,
    scope_collection_name,
)

VALID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{1,510}[A-Za-z0-9]\Z")


def names(local_vm) -> set[str]:
    return {c if isinstance(c, str) else c.name for c in local_vm._client.list_collections()}


# --- naming ----------------------------------------------------------------------------


@pytest.mark.parametrize("scope", ["s1", "save-7f3a", "universe-12", "a.b_c-d", "x"])
def test_clean_scope_ids_keep_their_readable_name(scope):
    assert scope_collection_name(scope) == f"{COLLECTION_NAME}-{scope}"


@pytest.mark.parametrize(
    "scope",
    ["", "-", "a b", "ends-", "-starts", "a..b", "héros", "slash/id", "x" * 600, "192.168.1.1/..", "émoji 🐉"],
)
def test_other_scope_ids_get_a_valid_hashed_name(scope):
    name = scope_collection_name(scope)
    assert VALID.match(name), name
    assert ".." not in name
    assert name.startswith(f"{COLLECTION_NAME}--")
    assert name == scope_collection_name(scope)  # deterministic


def test_names_are_distinct_for_distinct_scopes():
    scopes = ["a b", "a-b", "a_b", "a.b", "a/b", "A b", "ab", "a  b", "a--b"]
    assert len({scope_collection_name(s) for s in scopes}) == len(scopes)


def test_odd_scope_ids_work_end_to_end(local_vm):
    odd = "save with spaces/é"
    chunk_id = local_vm.embed_chunk(odd, 1, "The dragon sleeps under the mountain")
    collection = local_vm.collection_for(odd)
    assert collection.metadata["scope_id"] == odd
    assert collection._embedding_function is None
    assert [h["id"] for h in local_vm.query(odd, "dragon", k=1)] == [chunk_id]
    assert local_vm.count(odd) == 1
    assert local_vm.get_chunks(odd)[0]["save_id"] == odd


# --- isolation -------------------------------------------------------------------------


def test_each_save_writes_its_own_collection(local_vm):
    local_vm.embed_chunk("s1", 1, "Kaël docks at Port Vey")
    local_vm.embed_chunk("s2", 1, "Mira sails to the north")
    local_vm.sync_lore("universe-12", [{"entry_id": "vey", "text": "Port Vey is a harbour town"}])
    assert {f"{COLLECTION_NAME}-s1", f"{COLLECTION_NAME}-s2", f"{COLLECTION_NAME}-universe-12"} <= names(local_vm)
    assert COLLECTION_NAME not in names(local_vm)  # no shared collection is created
    assert local_vm.collection_for("s1").count() == 1
    assert local_vm.collection_for("universe-12").get(include=["metadatas"])["metadatas"][0]["save_id"] == "universe-12"


def test_a_query_touches_only_its_saves_collection_without_where(local_vm, monkeypatch):
    own = local_vm.embed_chunk("s1", 1, "Kaël docks at Port Vey")
    local_vm.embed_chunk("s2", 1, "Kaël docks at Port Vey")  # same text in another save
    calls = []
    for scope in ("s1", "s2"):
        collection = local_vm.collection_for(scope)
        real_query = collection.query

        def spy(*args, _scope=scope, _real=real_query, **kwargs):
            calls.append((_scope, kwargs.get("where")))
            return _real(*args, **kwargs)

        monkeypatch.setattr(collection, "query", spy)
    hits = local_vm.query("s1", "Kaël Port Vey", k=5, current_turn_id=1)
    assert [h["id"] for h in hits] == [own]
    assert calls == [("s1", None)]  # its own collection, no `where` clause


def test_a_filter_cutting_many_chunks_goes_to_chroma_without_the_save(local_vm, monkeypatch):
    # Neither the unfiltered query for a filter excluding a few nor exact search for one keeping a few
    # (test_exact_search.py): the `where` a filter cutting many and keeping many gets.
    local_vm.config = local_vm.config.__class__(arm_depth=2, unfiltered_fetch_max=0, exact_search_max=0)
    local_vm.embed_chunks("s1", [{"turn_id": t, "text": f"Kaël walks the road, day {t}"} for t in range(1, 40)])
    lore = local_vm.embed_chunk("s1", 0, "Kaël is a smuggler", chunk_type="lore")
    collection = local_vm.collection_for("s1")
    wheres = []
    real_query = collection.query
    monkeypatch.setattr(collection, "query", lambda *a, **kw: wheres.append(kw.get("where")) or real_query(*a, **kw))
    hits = local_vm.query("s1", "Kaël smuggler", k=1, chunk_type="lore")
    assert [h["id"] for h in hits] == [lore]
    assert wheres == [{"chunk_type": "lore"}]


def test_rollback_and_delete_of_one_save_leave_the_other(local_vm):
    for save in ("s1", "s2"):
        local_vm.embed_chunks(save, [{"turn_id": t, "text": f"{save} turn {t} the storm rises"} for t in range(1, 6)])
    local_vm.query("s2", "storm", k=3)  # cache s2's corpus
    assert local_vm.rollback("s1", 2) == 3
    assert local_vm.count("s1") == 2
    assert local_vm.count("s2") == 5
    assert {h["turn_id"] for h in local_vm.query("s2", "storm", k=10)} == {1, 2, 3, 4, 5}
    assert local_vm.delete_save("s1") == 2
    assert f"{COLLECTION_NAME}-s1" not in names(local_vm)  # the collection is dropped
    assert local_vm.count("s1") == 0
    assert local_vm.query("s1", "storm", k=3) == []
    assert local_vm.get_chunks("s1") == []
    assert local_vm.count("s2") == 5
    assert len(local_vm.query("s2", "storm", k=10)) == 5
    assert local_vm.delete_save("s1") == 0  # idempotent
    # A deleted save can be written again (a new collection).
    local_vm.embed_chunk("s1", 1, "a new beginning")
    assert local_vm.count("s1") == 1


def test_reads_of_an_unknown_save_create_no_collection(local_vm):
    before = names(local_vm)
    assert local_vm.count("nobody") == 0
    assert local_vm.get_chunks("nobody") == []
    assert local_vm.query("nobody", "anything", k=3) == []
    assert local_vm.rollback("nobody", 0) == 0
    assert local_vm.explain_chunk("nobody", "x", "missing")["filtered_out"] == "no such chunk"
    assert names(local_vm) == before


def test_copy_save_copies_between_collections(local_vm):
    local_vm.embed_chunks("src", [{"turn_id": t, "text": f"turn {t} the lantern flickers"} for t in range(1, 5)])
    assert local_vm.copy_save("src", "fork", max_turn_id=2) == 2
    assert local_vm.count("fork") == 2
    assert local_vm.count("src") == 4
    rows = local_vm.get_chunks("fork")
    assert {r["save_id"] for r in rows} == {"fork"}
    assert {r["turn_id"] for r in rows} == {1, 2}
    source_ids = {r["id"] for r in local_vm.get_chunks("src")}
    assert not source_ids & {r["id"] for r in rows}
    local_vm.delete_save("src")
    assert local_vm.count("fork") == 2  # the fork does not depend on its source


def test_a_collection_dropped_by_another_process_is_handled(local_vm, embedder):
    local_vm.embed_chunk("s1", 1, "The storm rises")
    local_vm.query("s1", "storm", k=1)  # this instance caches the collection object
    other = VectorMemory(None, client=local_vm._client, embedder=embedder, versions=local_vm._versions)
    assert other.delete_save("s1") == 1
    assert local_vm.count("s1") == 0
    assert local_vm.query("s1", "storm", k=1) == []
    new_id = local_vm.embed_chunk("s1", 1, "The storm passes")  # recreated despite the stale cache
    assert [h["id"] for h in other.query("s1", "storm", k=1)] == [new_id]


# --- legacy shared collection ----------------------------------------------------------


def fill_legacy(client, embedder):
    legacy = client.get_or_create_collection(
        COLLECTION_NAME, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
    )
    rows = [
        ("a1", "s1", 1, "narrative", "Kaël docks at Port Vey"),
        ("a2", "s1", 2, "narrative", "The storm batters the lighthouse"),
        ("a0", "s1", 0, "lore", "Port Vey is a harbour town"),
        ("b1", "s2", 1, "narrative", "Mira buys bread in the market"),
    ]
    metadatas = []
    for seq, (_chunk_id, save, turn, kind, _text) in enumerate(rows):
        metadata = {
            "save_id": save,
            "turn_id": turn,
            "chunk_type": kind,
            "chunk_seq": seq,
            "chunk_part": 0,
            "chunk_parts": 1,
        }
        if kind == "lore":
            metadata.update(entry_id="vey", links=["kael", "mira"])
        metadatas.append(metadata)
    legacy.add(
        ids=[r[0] for r in rows],
        documents=[r[4] for r in rows],
        metadatas=metadatas,
        embeddings=np.asarray(embedder.encode([r[4] for r in rows]), dtype=np.float32),
    )
    return legacy, metadatas


def test_legacy_shared_collection_is_migrated_on_first_access(tmp_path, embedder):
    path = str(tmp_path / "chroma")
    local_vm = VectorMemory(path, embedder=embedder, versions=LocalCorpusVersions())
    legacy, metadatas = fill_legacy(local_vm._client, embedder)
    vectors = {
        i: np.asarray(v) for i, v in zip(*[legacy.get(include=["embeddings"])[k] for k in ("ids", "embeddings")])
    }
    local_vm.close()

    local_vm = VectorMemory(path, embedder=embedder, versions=LocalCorpusVersions())
    try:
        hits = local_vm.query("s1", "storm lighthouse", k=1)
        assert [h["id"] for h in hits] == ["a2"]  # ids are kept
        moved = local_vm.collection_for("s1").get(include=["metadatas", "embeddings", "documents"])
        assert sorted(moved["ids"]) == ["a0", "a1", "a2"]
        by_id = dict(zip(moved["ids"], zip(moved["metadatas"], moved["embeddings"], moved["documents"])))
        assert by_id["a0"][0] == metadatas[2]  # metadata exactly as stored, lists included
        assert np.allclose(by_id["a1"][1], vectors["a1"])  # embeddings copied, not recomputed
        assert by_id["a1"][2] == "Kaël docks at Port Vey"
        assert local_vm._client.get_collection(COLLECTION_NAME).get(include=[])["ids"] == ["b1"]
        assert local_vm.count("s2") == 1  # migrates s2 ...
        assert COLLECTION_NAME not in names(local_vm)  # ... and drops the emptied shared collection
        assert [r["id"] for r in local_vm.get_chunks("s2")] == ["b1"]
        assert local_vm.rollback("s1", 1) == 1
        assert local_vm.count("s1") == 2
    finally:
        local_vm.close()


def test_legacy_migration_is_idempotent_across_instances(tmp_path, embedder):
    import chromadb
    from chromadb.config import Settings

    client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
    prefix = "legacy_test"
    first = VectorMemory(None, client=client, embedder=embedder, versions=LocalCorpusVersions(), collection_name=prefix)
    legacy = client.get_or_create_collection(prefix, embedding_function=None)
    legacy.add(
        ids=["x1"],
        documents=["The storm rises"],
        metadatas=[
            {
                "save_id": "s1",
                "turn_id": 1,
                "chunk_type": "narrative",
                "chunk_seq": 0,
                "chunk_part": 0,
                "chunk_parts": 1,
            }
        ],
        embeddings=np.asarray(embedder.encode(["The storm rises"]), dtype=np.float32),
    )
    second = VectorMemory(None, client=client, embedder=embedder, versions=first._versions, collection_name=prefix)
    assert first.count("s1") == 1
    assert second.count("s1") == 1  # nothing left to move, nothing duplicated
    assert [h["id"] for h in second.query("s1", "storm", k=5)] == ["x1"]
    client.delete_collection(scope_collection_name("s1", prefix))


def test_update_turn_narratives_replaces_several_turns_at_once(local_vm, monkeypatch):
    local_vm.embed_chunks("s1", [{"turn_id": t, "text": f"turn {t} first draft"} for t in (1, 2, 3)])
    lore = local_vm.embed_chunk("s1", 2, "a lore note of turn two", chunk_type="lore")
    encodes = []
    real_encode = local_vm._embedder.encode
    monkeypatch.setattr(
        local_vm._embedder, "encode", lambda texts, **kw: encodes.append(list(texts)) or real_encode(texts, **kw)
    )
    local_vm.update_turn_narratives("s1", {2: "turn 2 rewritten", 3: "turn 3 rewritten"})
    local_vm.update_turn_narratives("s1", {2: "turn 2 rewritten", 3: "turn 3 rewritten"})  # a re-run
    assert len(encodes) == 2  # one encode call per batch
    rows = local_vm.get_chunks("s1")
    assert [(r["turn_id"], r["chunk_type"], r["text"]) for r in rows] == [
        (1, "narrative", "turn 1 first draft"),
        (2, "lore", "a lore note of turn two"),
        (2, "narrative", "turn 2 rewritten"),
        (3, "narrative", "turn 3 rewritten"),
    ]
    assert lore in {r["id"] for r in rows}
