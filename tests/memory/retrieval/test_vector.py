"""VectorMemory behaviour with a deterministic embedder (the real model: test_vector_model.py)."""

from __future__ import annotations

import pytest

from studio.memory import vector
from studio.memory.retrieval import lexical, store
from studio.memory.vector import RetrievalConfig, VectorMemory
from studio.memory.models import VectorCorpusVersion
from tests.fakes import HashingEmbedder

EXPLAIN_KEYS = {
    "semantic_rank",
    "semantic_distance",
    "lexical_rank",
    "bm25_score",
    "rrf_score",
    "focus_boost",
    "rerank_score",
    "final_rank",
    "expanded_from",
}


def fill(vm, save_id="s1"):
    texts = {
        1: "Kaël the smuggler docks at Port Vey at dawn",
        2: "A storm batters the lighthouse on the northern cliffs",
        3: "Mira buys bread and salted fish in the market",
        4: "The guards search every ship in Port Vey for contraband",
        5: "Kaël hides the stolen map under a loose plank",
    }
    return {turn: vm.embed_chunk(save_id, turn, text) for turn, text in texts.items()}


def test_embed_chunk_returns_id_and_stores_core_metadata(vm):
    chunk_id = vm.embed_chunk(
        "s1", 3, "Kaël sails.", metadata_extra={"entry_id": "kael", "turn_id": 99, "mood": "grim"}
    )
    assert chunk_id and isinstance(chunk_id, str)
    [row] = vm.get_chunks("s1")
    assert row["id"] == chunk_id
    assert row["turn_id"] == 3  # the core key wins over metadata_extra
    assert row["chunk_type"] == "narrative"
    assert row["entry_id"] == "kael"
    assert row["mood"] == "grim"
    assert vm.count("s1") == 1
    assert vm.count("other") == 0


def test_blank_text_stores_nothing(vm):
    assert vm.embed_chunk("s1", 1, "   ") == ""
    assert vm.count("s1") == 0


def test_query_result_shape_and_explain(vm):
    ids = fill(vm)
    results = vm.query("s1", "Where does Kaël hide the map?", k=3)
    assert len(results) == 3
    top = results[0]
    assert top["id"] == ids[5]
    assert {"id", "text", "turn_id", "chunk_type", "entry_id", "metadata", "explain", "score"} <= set(top)
    assert top["entry_id"] is None
    assert top["save_id"] == "s1" and top["metadata"]["save_id"] == "s1"
    assert EXPLAIN_KEYS <= set(top["explain"])
    assert top["explain"]["final_rank"] == 1
    assert top["explain"]["lexical_rank"] == 1
    assert top["explain"]["bm25_score"] > 0
    assert top["explain"]["semantic_rank"] is not None
    assert [r["explain"]["final_rank"] for r in results] == [1, 2, 3]
    stats = vm.last_query_stats
    assert {"corpus", "index", "embed_query", "semantic", "lexical", "fusion", "total"} <= set(stats.timings_ms)


def test_query_isolated_per_save(vm):
    fill(vm, "s1")
    vm.embed_chunk("s2", 1, "Kaël in another timeline hides the map")
    assert {r["save_id"] for r in vm.query("s1", "Kaël map", k=10)} == {"s1"}
    assert [r["save_id"] for r in vm.query("s2", "Kaël map", k=10)] == ["s2"]


def test_query_empty_inputs(vm):
    fill(vm)
    assert vm.query("s1", "", k=5) == []
    assert vm.query("s1", "Kaël", k=0) == []
    assert vm.query("nobody", "Kaël", k=5) == []


def test_turn_horizon_is_min_of_current_and_max(vm):
    ids = fill(vm)
    seen = {r["turn_id"] for r in vm.query("s1", "Kaël Port Vey map", k=10, current_turn_id=4)}
    assert seen and max(seen) <= 4
    seen = {r["turn_id"] for r in vm.query("s1", "Kaël Port Vey map", k=10, current_turn_id=4, max_turn_id=2)}
    assert seen and max(seen) <= 2
    seen = {r["turn_id"] for r in vm.query("s1", "Kaël Port Vey map", k=10, current_turn_id=1, max_turn_id=5)}
    assert seen == {1}
    assert ids[5] in {r["id"] for r in vm.query("s1", "Kaël map", k=10)}


def test_chunk_type_include_and_exclude(vm):
    fill(vm)
    lore_id = vm.embed_chunk(
        "s1", 0, "Kaël is a smuggler from Port Vey", chunk_type="lore", metadata_extra={"entry_id": "kael"}
    )
    only_lore = vm.query("s1", "Kaël smuggler", k=10, chunk_type="lore")
    assert [r["id"] for r in only_lore] == [lore_id]
    without_lore = vm.query("s1", "Kaël smuggler", k=10, exclude_chunk_type="lore")
    assert without_lore and all(r["chunk_type"] != "lore" for r in without_lore)
    mixed = vm.query("s1", "Kaël smuggler", k=10)
    assert lore_id in {r["id"] for r in mixed}


def test_focus_terms_boost_chunks_mentioning_them(vm):
    vm.embed_chunk("s1", 1, "The tavern was loud that night with Mira singing")
    vm.embed_chunk("s1", 2, "The tavern was loud that night near the harbour")
    for turn in range(3, 8):
        vm.embed_chunk("s1", turn, f"filler text number {turn} about weather")
    plain = vm.query("s1", "loud tavern night", k=2)
    boosted = vm.query("s1", "loud tavern night", k=2, focus_terms=["harbour"])
    assert plain[0]["explain"]["focus_boost"] == 0.0
    assert boosted[0]["text"].endswith("near the harbour")
    assert boosted[0]["explain"]["focus_boost"] > 0
    assert boosted[0]["score"] == pytest.approx(
        boosted[0]["explain"]["rrf_score"] + boosted[0]["explain"]["focus_boost"]
    )
    # A multi-word focus term must match as a phrase, case-insensitively.
    again = vm.query("s1", "loud tavern night", k=2, focus_terms=["MIRA singing"])
    assert again[0]["text"].endswith("Mira singing")


def test_rollback_deletes_later_turns_and_counts(vm):
    fill(vm)
    vm.sync_lore("s1", [{"entry_id": "kael", "text": "Kaël is a smuggler."}])
    assert vm.rollback("s1", 3) == 2
    assert sorted({r["turn_id"] for r in vm.get_chunks("s1")}) == [0, 1, 2, 3]
    assert vm.rollback("s1", 3) == 0
    assert vm.rollback("s1", 0) == 3  # lore (turn 0) survives every rewind
    assert [r["chunk_type"] for r in vm.get_chunks("s1")] == ["lore"]
    assert vm.query("s1", "Kaël smuggler", k=5)[0]["entry_id"] == "kael"


def test_sync_lore_is_idempotent(vm):
    entries = [
        {"entry_id": "kael", "text": "Kaël is a smuggler.", "title": "Kaël", "links": ["port-vey"]},
        {"entry_id": "port-vey", "text": "Port Vey is a harbour town."},
        {"entry_id": "empty", "text": "  "},
    ]
    vm.embed_chunk("s1", 1, "Narrative stays.")
    assert vm.sync_lore("s1", entries) == 2
    first = {r["entry_id"]: r for r in vm.get_chunks("s1", chunk_type="lore")}
    assert vm.sync_lore("s1", entries) == 2
    second = {r["entry_id"]: r for r in vm.get_chunks("s1", chunk_type="lore")}
    assert set(first) == set(second) == {"kael", "port-vey"}
    assert second["kael"]["turn_id"] == 0 and second["kael"]["title"] == "Kaël"
    assert second["kael"]["links"] == ["port-vey"]
    assert vm.count("s1") == 3
    assert vm.sync_lore("s1", entries[1:]) == 1
    assert [r["entry_id"] for r in vm.get_chunks("s1", chunk_type="lore")] == ["port-vey"]
    assert vm.sync_lore("s1", []) == 0
    assert vm.get_chunks("s1", chunk_type="lore") == []
    assert vm.count("s1") == 1


def test_update_turn_narrative_replaces_only_that_turn_and_type(vm):
    fill(vm)
    note = vm.embed_chunk("s1", 2, "GM note about the storm", chunk_type="note")
    vm.update_turn_narrative("s1", 2, "The storm passes; the cliffs are calm")
    turn2 = [r for r in vm.get_chunks("s1") if r["turn_id"] == 2]
    assert sorted(r["text"] for r in turn2) == ["GM note about the storm", "The storm passes; the cliffs are calm"]
    assert note in {r["id"] for r in turn2}
    assert vm.count("s1") == 6
    hits = vm.query("s1", "lighthouse batters", k=5)
    assert all("batters" not in r["text"] for r in hits)


def test_long_text_is_chunked_with_overlap_and_one_turn(db, tmp_path):
    embedder = HashingEmbedder(max_tokens=40)
    vm = VectorMemory(str(tmp_path / "c"), embedder=embedder)
    words = [f"w{i}" for i in range(100)]
    first = vm.embed_chunk("s1", 7, " ".join(words))
    rows = vm.get_chunks("s1")
    assert len(rows) > 2
    assert rows[0]["id"] == first
    assert {r["turn_id"] for r in rows} == {7}
    assert [r["chunk_part"] for r in rows] == list(range(len(rows)))
    assert all(r["chunk_parts"] == len(rows) for r in rows)
    covered = set()
    for left, right in zip(rows, rows[1:]):
        assert set(left["text"].split()) & set(right["text"].split())  # overlap
    for row in rows:
        assert len(row["text"].split()) <= 40
        covered |= set(row["text"].split())
    assert covered == set(words)
    assert vm.rollback("s1", 6) == len(rows)
    vm.close()


def test_embed_chunks_batches_and_returns_ids_per_item(vm, embedder):
    items = [{"turn_id": i, "text": f"entry number {i}"} for i in range(1, 71)]
    items.insert(5, {"turn_id": 3, "text": ""})
    ids = vm.embed_chunks("s1", items, batch_size=16)
    assert len(ids) == 71 and ids[5] == "" and all(ids[:5]) and all(ids[6:])
    assert len(embedder.encode_calls) == 1  # one encode call, batched inside the model
    assert vm.count("s1") == 70
    version = VectorCorpusVersion.objects.get(scope_id="s1").version
    assert version == 1  # one bump for the whole batch


def test_copy_save_copies_embeddings_without_reembedding(vm, embedder):
    fill(vm, "src")
    vm.sync_lore("src", [{"entry_id": "kael", "text": "Kaël is a smuggler."}])
    calls = len(embedder.encode_calls)
    assert vm.copy_save("src", "fork", max_turn_id=3) == 4  # turns 0..3
    assert len(embedder.encode_calls) == calls
    fork = vm.get_chunks("fork")
    assert sorted(r["turn_id"] for r in fork) == [0, 1, 2, 3]
    assert all(r["save_id"] == "fork" for r in fork)
    # Idempotent, and chunks after the fork point in the target are kept.
    vm.embed_chunk("fork", 9, "A new branch of the story")
    assert vm.copy_save("src", "fork", max_turn_id=3) == 4
    assert vm.count("fork") == 5
    assert vm.count("src") == 6
    hits = vm.query("fork", "Kaël hides the map", k=10)
    assert all(r["turn_id"] <= 3 or r["turn_id"] == 9 for r in hits)


def test_get_pages_past_the_page_size(vm, monkeypatch):
    monkeypatch.setattr(store, "GET_PAGE_SIZE", 7)
    vm.embed_chunks("s1", [{"turn_id": i, "text": f"chunk {i} text"} for i in range(1, 31)])
    assert vm.count("s1") == 30
    assert len(vm.get_chunks("s1")) == 30
    assert len(vm.query("s1", "chunk text", k=30)) == 30
    assert vm.rollback("s1", 4) == 26
    assert vm.count("s1") == 4


def test_bm25_cache_reused_until_the_corpus_changes(vm):
    fill(vm)
    vm.query("s1", "Kaël", k=3)
    assert vm.last_query_stats.corpus_rebuilt is True
    vm.query("s1", "storm", k=3)
    assert vm.last_query_stats.corpus_rebuilt is False
    for change in (
        lambda: vm.embed_chunk("s1", 6, "Kaël returns to the market"),
        lambda: vm.rollback("s1", 5),
        lambda: vm.update_turn_narrative("s1", 5, "Kaël burns the map"),
        lambda: vm.sync_lore("s1", [{"entry_id": "kael", "text": "Kaël lore"}]),
    ):
        change()
        vm.query("s1", "Kaël", k=3)
        assert vm.last_query_stats.corpus_rebuilt is True
        vm.query("s1", "Kaël", k=3)
        assert vm.last_query_stats.corpus_rebuilt is False


def test_change_from_another_process_invalidates_the_cache(vm, embedder):
    fill(vm)
    assert all("lantern" not in r["text"] for r in vm.query("s1", "lantern", k=5))
    # A second VectorMemory on the same store stands for a worker process: it shares
    # nothing in memory with `vm`, only the database version and Chroma.
    worker = VectorMemory(None, client=vm._client, embedder=embedder)
    worker.embed_chunk("s1", 6, "Mira lights a lantern in the hold")
    assert vm.query("s1", "lantern", k=1)[0]["text"] == "Mira lights a lantern in the hold"
    worker.rollback("s1", 5)
    assert all("lantern" not in r["text"] for r in vm.query("s1", "lantern", k=5))


def test_embedding_runtime_unavailable_disables_without_crash(db, tmp_path, monkeypatch):
    monkeypatch.setattr(vector.embedding, "get_embedder", lambda: None)
    vm = VectorMemory(str(tmp_path / "c"))
    assert vm.embeddings_available is False
    assert vm.embed_chunk("s1", 1, "text") == ""
    assert vm.sync_lore("s1", [{"entry_id": "a", "text": "x"}]) == 0
    assert vm.query("s1", "text", k=5) == []
    vm.update_turn_narrative("s1", 1, "new")
    assert vm.rollback("s1", 0) == 0
    assert vm.count("s1") == 0
    vm.close()


def test_without_bm25_search_is_semantic_only(vm, monkeypatch):
    ids = fill(vm)
    monkeypatch.setattr(lexical, "_BM25Okapi", None)
    vm.set_config(vm.config)  # drop indexes built while BM25 was there
    results = vm.query("s1", "Kaël hides the map under a plank", k=3)
    assert results[0]["id"] == ids[5]
    assert all(r["explain"]["lexical_rank"] is None for r in results)
    assert vm.last_query_stats.lexical_available is False


class ScriptedReranker:
    def __init__(self, prefer=None, fail=False):
        self.prefer = prefer
        self.fail = fail
        self.seen: list[list[str]] = []

    def rerank(self, query_text, documents):
        self.seen.append(list(documents))
        if self.fail:
            return None
        return [1.0 if self.prefer and self.prefer in d else 0.1 for d in documents]


def test_reranker_reorders_a_capped_pool(db, tmp_path, embedder):
    reranker = ScriptedReranker(prefer="market")
    vm = VectorMemory(str(tmp_path / "c"), reranker, embedder=embedder, rerank_pool=3)
    fill(vm)
    results = vm.query("s1", "Kaël Port Vey", k=3)
    assert len(reranker.seen[0]) <= 3
    if any("market" in d for d in reranker.seen[0]):
        assert "market" in results[0]["text"]
    assert results[0]["explain"]["rerank_score"] is not None
    assert vm.last_query_stats.reranked is True
    vm.close()


def test_reranker_sees_only_pool_and_promotes(db, tmp_path, embedder):
    reranker = ScriptedReranker(prefer="plank")
    vm = VectorMemory(str(tmp_path / "c"), reranker, embedder=embedder, rerank_pool=50)
    fill(vm)
    results = vm.query("s1", "Kaël", k=2)
    assert "plank" in results[0]["text"]
    assert results[0]["explain"]["rerank_score"] == 1.0
    vm.close()


def test_failing_reranker_keeps_fused_order(db, tmp_path, embedder):
    plain = VectorMemory(str(tmp_path / "a"), embedder=embedder)
    fill(plain)
    expected = [r["id"] for r in plain.query("s1", "Kaël Port Vey", k=4)]
    failing = VectorMemory(None, ScriptedReranker(fail=True), client=plain._client, embedder=embedder)
    results = failing.query("s1", "Kaël Port Vey", k=4)
    assert [r["id"] for r in results] == expected
    assert all(r["explain"]["rerank_score"] is None for r in results)
    assert failing.last_query_stats.reranked is False
    plain.close()


def test_lore_link_expansion_one_hop_capped_and_marked(vm):
    vm.sync_lore(
        "s1",
        [
            {"entry_id": "kael", "text": "Kaël the smuggler captains the Gull", "links": ["gull", "port-vey", "ghost"]},
            {"entry_id": "gull", "text": "A fast black sloop", "links": ["yard"]},
            {"entry_id": "port-vey", "text": "A harbour town of fog"},
            {"entry_id": "yard", "text": "The shipyard where sloops are built"},
            {"entry_id": "other", "text": "Unrelated mountain monastery"},
        ],
    )
    plain = vm.query("s1", "Kaël smuggler captain", k=1, chunk_type="lore")
    assert [r["entry_id"] for r in plain] == ["kael"]
    outcome = vm.query_explained("s1", "Kaël smuggler captain", k=1, chunk_type="lore", expand_links=True)
    entries = [r["entry_id"] for r in outcome.results]
    assert entries == ["kael", "gull", "port-vey"]  # "ghost" does not exist; no second hop to "yard"
    assert [r["explain"]["expanded_from"] for r in outcome.results] == [None, "kael", "kael"]
    capped = VectorMemory(None, client=vm._client, embedder=vm._embedder, config=RetrievalConfig(link_expansion_cap=1))
    outcome = capped.query_explained("s1", "Kaël smuggler captain", k=1, chunk_type="lore", expand_links=True)
    assert [r["entry_id"] for r in outcome.results] == ["kael", "gull"]


def test_explain_chunk_reports_ranks_and_filters(vm):
    ids = fill(vm)
    report = vm.explain_chunk("s1", "storm lighthouse", ids[2], k=1)
    assert report["filtered_out"] is None
    assert report["ranks"]["lexical"] == 1 and report["final_rank"] == 1
    report = vm.explain_chunk("s1", "storm lighthouse", ids[3], k=1)
    assert report["final_rank"] is None
    assert report["ranks"]["semantic"] > 1
    assert "lexical" not in report["ranks"]  # no shared term: no lexical signal
    assert "after the horizon" in vm.explain_chunk("s1", "storm", ids[5], current_turn_id=4)["filtered_out"]
    assert "excluded" in vm.explain_chunk("s1", "storm", ids[5], exclude_chunk_type="narrative")["filtered_out"]
    assert "belongs to save" in vm.explain_chunk("s2", "storm", ids[5])["filtered_out"]
    assert vm.explain_chunk("s1", "storm", "missing")["filtered_out"] == "no such chunk"


def test_chroma_default_embedding_function_is_never_attached(vm):
    fill(vm)
    collection = vm.collection_for("s1")
    assert collection._embedding_function is None
    assert collection.name == "narrative_memory-s1"
    assert collection.metadata["scope_id"] == "s1"


def test_cache_reload_fetches_only_new_chunks(vm, embedder, monkeypatch):
    fill(vm)
    vm.query("s1", "Kaël", k=3)
    worker = VectorMemory(None, client=vm._client, embedder=embedder)
    new_id = worker.embed_chunk("s1", 6, "Mira lights a lantern")
    worker.rollback("s1", 5)  # deletes it again...
    newer_id = worker.embed_chunk("s1", 6, "Mira blows out the lantern")  # ...and writes another
    collection = vm.collection_for("s1")
    calls = []
    real_get = collection.get

    def spying_get(*args, **kwargs):
        calls.append(kwargs)
        return real_get(*args, **kwargs)

    monkeypatch.setattr(collection, "get", spying_get)
    hits = vm.query("s1", "lantern", k=3)
    assert [h["id"] for h in hits][:1] == [newer_id]
    assert new_id not in {h["id"] for h in vm.query("s1", "Mira lantern", k=10)}
    fetched_documents = [c for c in calls if "documents" in (c.get("include") or [])]
    assert fetched_documents == [{"ids": [newer_id], "include": ["documents", "metadatas"]}]


@pytest.mark.parametrize("arm_depth", [1, 50])
def test_filters_hold_whether_chroma_or_the_engine_filters(db, tmp_path, embedder, arm_depth):
    # arm_depth 1 (k=1 -> depth 2): more chunks excluded than 3x depth, so Chroma filters;
    # arm_depth 50: the few excluded chunks are fetched and dropped by the engine.
    vm = VectorMemory(str(tmp_path / "c"), embedder=embedder, config=RetrievalConfig(arm_depth=arm_depth))
    vm.embed_chunks("s1", [{"turn_id": t, "text": f"the lantern burns in turn {t}"} for t in range(1, 21)])
    vm.sync_lore("s1", [{"entry_id": f"l{i}", "text": f"lantern lore {i}"} for i in range(10)])
    for k in (1, 10):
        hits = vm.query("s1", "lantern", k=k, current_turn_id=3, exclude_chunk_type="lore")
        assert hits and all(h["turn_id"] <= 3 and h["chunk_type"] == "narrative" for h in hits)
        assert vm.last_query_stats.arm_sizes["semantic"] >= 1
        hits = vm.query("s1", "lantern lore", k=k, chunk_type="lore")
        assert hits and all(h["chunk_type"] == "lore" for h in hits)
        assert vm.last_query_stats.arm_sizes["semantic"] >= 1
    vm.close()
