"""The search's parts in studio/memory/retrieval/: arms, their evidence, the corpus cache's deltas."""

from __future__ import annotations

import pytest

from studio.memory.embeddings import embedding
from studio.memory.retrieval import arms, views
from studio.memory.retrieval.corpus import CorpusCache
from studio.memory.vector import RetrievalConfig, VectorMemory


@pytest.fixture
def four_chunks_vm(local_vm):
    local_vm.embed_chunks(
        "s1",
        [
            {"turn_id": 1, "text": "Kaël the smuggler docks at Port Vey at dawn"},
            {"turn_id": 1, "text": "The harbour bell rings twice"},
            {"turn_id": 2, "text": "A storm batters the lighthouse on the northern cliffs"},
            {"turn_id": 3, "text": "Mira hides the Bellwright's Key under a loose plank"},
        ],
    )
    return local_vm


def test_every_arm_names_known_evidence_and_the_default_arms_in_fusion_order():
    assert tuple(arm.name for arm in arms.ARMS) == RetrievalConfig().arms
    for arm in arms.ARMS:
        assert arm.reads and set(arm.reads) <= set(arms.EVIDENCE), arm.name
        assert arm.stage in {"semantic", "lexical"}


def test_arms_fuse_in_their_own_order_whatever_order_the_config_lists(four_chunks_vm):
    four_chunks_vm.set_config(RetrievalConfig(arms=("turn", "context", "lexical", "semantic")))
    four_chunks_vm.query("s1", "Kaël smuggler", k=3)
    assert list(four_chunks_vm.last_query_stats.arm_sizes) == ["semantic", "lexical", "context", "turn"]


def test_stats_say_which_arms_did_not_run_and_why(four_chunks_vm, monkeypatch):
    outcome = four_chunks_vm.query_explained("s1", "Kaël smuggler", k=3)
    assert outcome.stats.skipped_arms == {}
    assert outcome.stats.as_dict()["skipped_arms"] == {}

    stop_words_only = four_chunks_vm.query_explained("s1", "what did the", k=3)
    assert stop_words_only.results  # the semantic arm still answers
    assert stop_words_only.stats.skipped_arms == {
        "lexical": "the query has no index terms",
        "context": "the query has no index terms",
        "turn": "the query has no index terms",
    }
    assert list(stop_words_only.stats.arm_sizes) == ["semantic"]

    empty = four_chunks_vm.query_explained("s1", "Kaël", k=3, chunk_type="lore")
    assert empty.results == []
    assert set(empty.stats.skipped_arms) == {"semantic", "lexical", "context", "turn"}
    assert set(empty.stats.skipped_arms.values()) == {"no chunk passes the filters"}

    four_chunks_vm.set_config(RetrievalConfig(arms=("semantic", "lexical")))
    narrowed = four_chunks_vm.query_explained("s1", "Kaël smuggler", k=3)
    assert narrowed.stats.skipped_arms == {
        "context": "not in RetrievalConfig.arms",
        "turn": "not in RetrievalConfig.arms",
    }

    monkeypatch.setattr(embedding, "get_embedder", lambda: None)  # no embedding runtime here
    blind = VectorMemory(None, client=four_chunks_vm._client, versions=four_chunks_vm._versions)
    lexical_only = blind.query_explained("s1", "Kaël smuggler", k=3)
    assert lexical_only.stats.skipped_arms == {"semantic": "no embedding runtime"}
    assert lexical_only.results[0]["explain"]["semantic_rank"] is None


def test_shared_evidence_is_computed_once_per_query(four_chunks_vm, monkeypatch):
    calls = []
    real = views.ViewIndex.get_scores
    monkeypatch.setattr(views.ViewIndex, "get_scores", lambda self, terms: calls.append(id(self)) or real(self, terms))
    hits = four_chunks_vm.query("s1", "harbour bell rings", k=2)
    assert hits[0]["text"].startswith("The harbour bell")
    assert hits[0]["explain"]["lexical_rank"] == 1 and hits[0]["explain"]["turn_rank"] == 1
    # Three indexes read once each: the lexical and turn arms share the own-text scores.
    assert len(calls) == 3 and len(set(calls)) == 3


def test_a_reload_records_what_changed_since_the_cached_version(four_chunks_vm):
    config = RetrievalConfig()
    cache = CorpusCache(four_chunks_vm.store, four_chunks_vm._versions)
    first = cache.read("s1", config)
    assert first.rebuilt and first.corpus.delta is None and len(first.corpus.ids) == 4
    assert cache.read("s1", config).rebuilt is False  # same version: the cached corpus

    new_id = four_chunks_vm.embed_chunk("s1", 4, "The lantern gutters out")
    added = cache.read("s1", config)
    assert added.rebuilt and added.corpus.delta.added_ids == (new_id,) and added.corpus.delta.removed == 0
    assert added.corpus.delta.base_version == first.corpus.version

    four_chunks_vm.rollback("s1", 2)
    removed = cache.read("s1", config)
    assert removed.corpus.delta.added_ids == () and removed.corpus.delta.removed == 2
    assert [int(turn) for turn in removed.corpus.turn_ids] == [1, 1, 2]
