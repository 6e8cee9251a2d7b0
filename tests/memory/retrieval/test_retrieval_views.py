"""The arm rules for both save shapes and the BM25 views kept up to date by appends (views.py)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from studio.memory.retrieval import views
from studio.memory.retrieval.corpus import CorpusCache, LocalCorpusVersions, SearchFilter
from studio.memory.vector import RetrievalConfig, VectorMemory
from tests.fakes import HashingEmbedder


@pytest.fixture
def memory(tmp_path):
    vm = VectorMemory(str(tmp_path / "chroma"), embedder=HashingEmbedder(), versions=LocalCorpusVersions())
    yield vm
    vm.close()


GAME = [  # one narrative chunk per turn, the game's shape
    "Kaël docks at Port Vey at dawn.",
    "Mira asks who carries the old key.",
    "Kaël answers that the Bellwright keeps it.",  # the answer lacks "key"; its neighbour has it
    "Gulls circle the fish market.",
    "The tide turns at noon.",
    "A bard sings of the northern cliffs.",
    "Fog rolls over the harbour.",
    "A storm batters the lighthouse.",  # turn 8
    "The lantern of the zephyr tower burns blue.",  # turn 9
    "Merchants haggle over saffron.",
    "A cat sleeps on the warm stones.",
    "Bells ring for the evening prayer.",
]


def game_save(memory, save_id="g", turns=GAME):
    return memory.embed_chunks(save_id, [{"turn_id": n, "text": text} for n, text in enumerate(turns, start=1)])


def test_one_chunk_per_turn_skips_the_turn_arm_and_says_why(memory):
    game_save(memory)
    outcome = memory.query_explained("g", "Bellwright key", k=3)
    assert outcome.stats.skipped_arms == {
        "turn": "one chunk per turn (12 chunks, 12 turns): each turn is the chunk's own text (the lexical arm)"
    }
    assert list(outcome.stats.arm_sizes) == ["semantic", "lexical", "context"]
    assert all(row["explain"]["turn_rank"] is None for row in outcome.results)


def test_session_shaped_save_runs_every_arm(memory):
    memory.embed_chunks("s", [{"turn_id": 1 + n // 4, "text": f"{GAME[n % 5]} ({n})"} for n in range(12)])
    outcome = memory.query_explained("s", "Bellwright key", k=3)
    assert outcome.stats.skipped_arms == {}
    assert list(outcome.stats.arm_sizes) == ["semantic", "lexical", "context", "turn"]


def test_context_reads_the_turns_before_and_after_in_a_game_save(memory):
    ids = game_save(memory)
    outcome = memory.query_explained("g", "key", k=5)
    answer = next(row for row in outcome.results if row["id"] == ids[2])
    assert answer["explain"]["lexical_rank"] is None  # its own text lacks the word
    assert answer["explain"]["context_rank"] is not None  # turn 2, its neighbour, has it


def test_a_chunk_alone_is_left_out_of_the_context_arm(memory):
    memory.sync_lore(
        "one",
        [
            {"entry_id": "bell", "text": "The Bellwright keeps the key."},
            {"entry_id": "vey", "text": "Port Vey is a harbour town."},
            {"entry_id": "mira", "text": "Mira is a smuggler."},
            {"entry_id": "fog", "text": "Fog hides the cliffs."},
        ],
    )
    outcome = memory.query_explained("one", "Bellwright key", k=3, chunk_type="lore")  # entries never read each other
    assert outcome.stats.skipped_arms["context"].startswith("no chunk has a neighbour")
    assert outcome.results[0]["explain"]["lexical_rank"] == 1


def test_no_neighbour_past_the_horizon_leaks_into_context_or_score(memory):
    ids = game_save(memory)
    # Turn 8's neighbour turn 9 holds "zephyr": at horizon 8 nothing may know it.
    assert memory.query_explained("g", "zephyr", k=8).results[0]["turn_id"] == 9
    bounded = memory.query_explained("g", "zephyr lantern", k=5, current_turn_id=8)
    assert all(row["turn_id"] <= 8 for row in bounded.results)
    assert all(row["explain"]["context_rank"] is None for row in bounded.results)
    report = memory.explain_chunk("g", "storm zephyr", ids[7], k=5, current_turn_id=8)
    # Scores equal those of a save that never had turn 9.
    game_save(memory, "g8", GAME[:8])
    alone = memory.explain_chunk("g8", "storm zephyr", memory.get_chunks("g8")[7]["id"], k=5)
    assert report["scores"]["context"] == alone["scores"]["context"]
    assert report["scores"]["lexical"] == alone["scores"]["lexical"]
    # Unbounded, the same query does see turn 5 through turn 4's context.
    unbounded = memory.explain_chunk("g", "storm zephyr", ids[7], k=5)
    assert unbounded["scores"]["context"] > report["scores"]["context"]


def test_a_rewound_turn_leaves_no_trace_in_its_neighbours(memory):
    game_save(memory)
    memory.query("g", "zephyr", k=3)  # views of the five-turn corpus are cached
    memory.rollback("g", 8)
    after = memory.query_explained("g", "zephyr lantern", k=5)
    assert all(row["explain"]["context_rank"] is None for row in after.results)
    assert all(row["explain"]["lexical_rank"] is None for row in after.results)


def test_view_index_equals_bm25okapi_on_the_concatenated_documents(memory):
    game_save(memory)
    config = RetrievalConfig()
    cache = CorpusCache(memory.store, memory._versions)
    corpus = cache.read("g", config).corpus
    view = cache.view(corpus, SearchFilter(), config)
    terms = [corpus.terms[p] for p in view.positions]
    ctx = view.structure
    context_docs = [
        [t for m in ctx.context_members[ctx.context_indptr[i] : ctx.context_indptr[i + 1]] for t in terms[m]]
        for i in range(len(terms))
    ]
    for query in (["key"], ["bellwright", "key", "storm"], ["kaël", "zephyr", "nothing"]):
        expected = BM25Okapi(terms, k1=1.5, b=0.5).get_scores(query)
        assert np.allclose(view.own_index.get_scores(query), expected)
        assert np.allclose(
            view.context_index.get_scores(query), BM25Okapi(context_docs, k1=1.5, b=0.5).get_scores(query)
        )


def _assert_same_view(left, right, vocab):
    assert np.array_equal(left.positions, right.positions)
    assert np.array_equal(left.turn_of_position, right.turn_of_position)
    assert np.array_equal(left.context_adds, right.context_adds) and np.array_equal(left.turn_adds, right.turn_adds)
    for kind in ("own_index", "context_index", "turn_index"):  # the mean IDF's frequency counts, kept by updates
        left_index, right_index = getattr(left, kind), getattr(right, kind)
        assert np.array_equal(
            np.trim_zeros(left_index.df_counts[1:], "b"), np.trim_zeros(right_index.df_counts[1:], "b")
        )
        assert left_index.average_idf == right_index.average_idf and left_index.avgdl == right_index.avgdl, kind
    rng = random.Random(7)
    words = list(vocab)
    for _ in range(30):
        query = rng.sample(words, min(len(words), rng.randint(1, 4)))
        for kind in ("own_index", "context_index", "turn_index"):
            assert np.array_equal(getattr(left, kind).get_scores(query), getattr(right, kind).get_scores(query)), kind


def _session(n_turns, per_turn, start=1, seed=0):
    rng = random.Random(seed)
    vocabulary = "key lantern storm mira kaël harbour bell tower silver crown dock smuggler zephyr vey".split()
    return [
        {"turn_id": turn, "text": " ".join(rng.choices(vocabulary, k=rng.randint(2, 9)))}
        for turn in range(start, start + n_turns)
        for _ in range(per_turn)
    ]


@pytest.mark.parametrize("per_turn", [1, 3, 4])  # 4 + 1: a last turn that grows to fill the window
def test_appends_extend_the_views_to_what_a_cold_build_gives(memory, monkeypatch, per_turn):
    memory.embed_chunks("a", _session(6, per_turn))
    memory.sync_lore("a", [{"entry_id": "vey", "text": "Port Vey is a harbour town of smugglers"}])
    config = RetrievalConfig()
    cache = CorpusCache(memory.store, memory._versions)
    filters = [
        SearchFilter(),
        SearchFilter(exclude_chunk_type="lore"),
        SearchFilter(horizon=3),
        SearchFilter(horizon=6),
    ]
    corpus = cache.read("a", config).corpus
    for f in filters:
        cache.view(corpus, f, config)
    built = []
    real_build = views.build_view
    monkeypatch.setattr("studio.memory.retrieval.corpus.build_view", lambda *a: built.append(1) or real_build(*a))
    for step in range(3):
        # A new turn, and (for several chunks a turn) more chunks of the same last turn.
        writes = [_session(1, per_turn, start=7 + step, seed=step + 1)]
        if per_turn > 1:
            writes.append(_session(1, 1, start=7 + step, seed=step + 9))
        for items in writes:  # each write read on its own: a small last turn grows into a whole one
            memory.embed_chunks("a", items)
            read = cache.read("a", config)
            assert read.corpus.delta.removed == 0
            for f in filters:
                extended = cache.view(read.corpus, f, config)
                _assert_same_view(extended, real_build(read.corpus, extended.positions, config), read.corpus.vocab)
    assert built == [], "an append rebuilt a view from scratch"
    # A rewind removes the tail: the unbounded views are cut, not rebuilt, and give what a fresh cache gives.
    memory.rollback("a", 5)
    read = cache.read("a", config)
    assert read.corpus.delta.removed > 0
    fresh = CorpusCache(memory.store, memory._versions)
    fresh_corpus = fresh.read("a", config).corpus
    assert read.corpus.ids == fresh_corpus.ids
    for f in filters[:2]:
        after = cache.view(read.corpus, f, config)
        _assert_same_view(after, real_build(fresh_corpus, after.positions, config), read.corpus.vocab)
    assert built == [], "a rewind rebuilt an unbounded view from scratch"
    for f in filters[2:]:  # a view bounded by a horizon is built again when the cut left it anything to cut
        after = cache.view(read.corpus, f, config)
        _assert_same_view(after, real_build(fresh_corpus, after.positions, config), read.corpus.vocab)
    # Appends after the rewind extend again, still equal to a cold build.
    built.clear()
    memory.embed_chunks("a", _session(2, per_turn, start=6, seed=42))
    read = cache.read("a", config)
    for f in filters[:2]:
        extended = cache.view(read.corpus, f, config)
        _assert_same_view(extended, real_build(read.corpus, extended.positions, config), read.corpus.vocab)
    assert built == []


@pytest.mark.parametrize("per_turn", [1, 3])
def test_rewinds_and_appends_in_turn_keep_the_views_equal_to_a_cold_build(memory, monkeypatch, per_turn):
    """A rewind by one, an append, a rewind by three, two appends, each read on its own and a cut carried unread."""
    memory.embed_chunks("r", _session(8, per_turn))
    memory.sync_lore("r", [{"entry_id": "vey", "text": "Port Vey is a harbour town of smugglers"}])
    config = RetrievalConfig()
    cache = CorpusCache(memory.store, memory._versions)
    filters = [SearchFilter(), SearchFilter(exclude_chunk_type="lore")]
    for f in filters:
        cache.view(cache.read("r", config).corpus, f, config)
    built = []
    real_build = views.build_view
    monkeypatch.setattr("studio.memory.retrieval.corpus.build_view", lambda *a: built.append(1) or real_build(*a))
    steps = [("rewind", 7), ("append", 8), ("rewind", 5), ("append", 6), ("append", 7), ("rewind", 6), ("append", 7)]
    for index, (kind, turn) in enumerate(steps):
        if kind == "rewind":
            memory.rollback("r", turn)
        else:
            memory.embed_chunks("r", _session(1, per_turn, start=turn, seed=100 + index))
        if index == 2:
            continue  # the rewind to 5 is read together with the append after it
        read = cache.read("r", config)
        fresh = CorpusCache(memory.store, memory._versions).read("r", config).corpus
        assert read.corpus.ids == fresh.ids
        assert [int(t) for t in read.corpus.turn_ids] == [int(t) for t in fresh.turn_ids]
        for f in filters:
            view = cache.view(read.corpus, f, config)
            _assert_same_view(view, real_build(fresh, view.positions, config), read.corpus.vocab)
    assert built == [], "a rewind or an append rebuilt a view from scratch"


def test_an_insert_before_existing_chunks_rebuilds(memory):
    memory.embed_chunks("b", _session(4, 2))
    config = RetrievalConfig()
    cache = CorpusCache(memory.store, memory._versions)
    cache.view(cache.read("b", config).corpus, SearchFilter(), config)
    memory.embed_chunks("b", [{"turn_id": 2, "text": "a late key for turn two"}])  # sorts before turn 3
    read = cache.read("b", config)
    assert read.corpus.earlier_views == {}
    view = cache.view(read.corpus, SearchFilter(), config)
    _assert_same_view(view, views.build_view(read.corpus, view.positions, config), read.corpus.vocab)


@pytest.mark.parametrize("per_turn", [1, 3])
def test_segments_sealed_merged_and_cut_give_what_a_cold_build_gives(memory, monkeypatch, per_turn):
    """Tiny segments (sealed at 4 documents, merged 2 at a time) so that appends seal and merge them and
    rewinds cut into sealed ones: every view still scores as a cold build of the same chunks."""
    from studio.memory.retrieval import segments

    monkeypatch.setattr(segments, "SEAL", 4)
    monkeypatch.setattr(segments, "KEEP_OPEN", 3)
    monkeypatch.setattr(segments, "MERGE", 2)
    memory.embed_chunks("z", _session(6, per_turn))
    memory.sync_lore("z", [{"entry_id": "vey", "text": "Port Vey is a harbour town of smugglers"}])
    config = RetrievalConfig()
    cache = CorpusCache(memory.store, memory._versions)
    filters = [SearchFilter(), SearchFilter(exclude_chunk_type="lore")]
    for f in filters:
        cache.view(cache.read("z", config).corpus, f, config)
    built = []
    real_build = views.build_view
    monkeypatch.setattr("studio.memory.retrieval.corpus.build_view", lambda *a: built.append(1) or real_build(*a))
    turn, levels = 6, set()
    steps = ["append"] * 14 + ["rewind 1", "append", "rewind 6", "append", "append", "rewind 2"] + ["append"] * 5
    for index, step in enumerate(steps):
        if step == "append":
            turn += 1
            memory.embed_chunks("z", _session(1, per_turn, start=turn, seed=200 + index))
        else:
            turn -= int(step.split()[1])
            memory.rollback("z", turn)
        read = cache.read("z", config)
        fresh = CorpusCache(memory.store, memory._versions).read("z", config).corpus
        assert read.corpus.ids == fresh.ids
        for f in filters:
            view = cache.view(read.corpus, f, config)
            _assert_same_view(view, real_build(fresh, view.positions, config), read.corpus.vocab)
            for index_ in (view.own_index, view.context_index, view.turn_index):
                levels |= {segment.level for segment in index_.segments}
                assert [s.start for s in index_.segments[1:]] == [s.end for s in index_.segments[:-1]]
                assert index_.segments[-1].end == index_.corpus_size
    assert built == [], "an append or a rewind rebuilt a view from scratch"
    assert {-1, 0, 1, 2} <= levels, levels  # open tails, sealed segments and both merged levels were exercised


def test_the_sorted_fast_paths_build_the_structure_the_sorts_build(memory, monkeypatch):
    """Chains and turns already in order skip the sorts; the structure is the same as with them, and a corpus
    whose chains interleave (two chunk types in one turn, lore written between turns) takes the sorts."""
    rng = random.Random(3)
    items = [
        {
            "turn_id": t,
            "text": " ".join(rng.choices("key lantern storm mira bell tower".split(), k=4)),
            "chunk_type": rng.choice(["narrative", "narrative", "aside"]),
        }
        for t in range(1, 40)
        for _ in range(rng.randint(1, 3))
    ]
    memory.embed_chunks("f", items)
    memory.sync_lore(
        "f", [{"entry_id": f"e{n}", "text": "lore " * 300 if n == 1 else f"entry {n} lantern"} for n in range(3)]
    )
    config = RetrievalConfig()
    corpus = CorpusCache(memory.store, memory._versions).read("f", config).corpus
    for positions in (
        np.arange(len(corpus.ids)),
        np.flatnonzero(corpus.chunk_types == "narrative"),
        np.flatnonzero(corpus.chunk_types != "aside"),
    ):
        fast = views.build_structure(corpus, positions, config)
        monkeypatch.setattr(views, "_sorted", lambda values: False)
        slow = views.build_structure(corpus, positions, config)
        monkeypatch.undo()
        for name in (
            "context_indptr",
            "context_members",
            "group_of",
            "group_indptr",
            "group_members",
            "context_span",
            "context_adds",
            "turn_adds",
        ):
            assert np.array_equal(getattr(fast, name), getattr(slow, name)), name


@pytest.mark.parametrize("per_turn", [1, 2, 6])
def test_the_structure_after_an_append_or_a_cut_is_the_structure_built_whole(memory, per_turn):
    memory.embed_chunks("t", _session(30, per_turn))
    memory.sync_lore("t", [{"entry_id": "vey", "text": "Port Vey " * 200}, {"entry_id": "bell", "text": "The bell"}])
    config = RetrievalConfig()
    corpus = CorpusCache(memory.store, memory._versions).read("t", config).corpus
    lore = int((corpus.chunk_types == "lore").sum())
    for positions in (np.arange(len(corpus.ids)), np.flatnonzero(corpus.chunk_types != "lore")):
        for same in range(max(1, len(positions) - 3 * per_turn - 4), len(positions)):
            for view_positions, kept in ((positions, same), (positions[:same], same)):  # an append; a cut
                old = views.build_structure(
                    corpus, positions[:same] if kept == same and len(view_positions) > same else positions, config
                )
                after = views.structure_after(old, corpus, view_positions, min(kept, len(view_positions)), config)
                whole = views.build_structure(corpus, view_positions, config)
                for name in (
                    "context_indptr",
                    "context_members",
                    "group_of",
                    "group_indptr",
                    "group_members",
                    "context_span",
                    "context_adds",
                    "turn_adds",
                ):
                    assert np.array_equal(getattr(after, name), getattr(whole, name)), (name, same, lore)


def test_an_append_at_the_tip_grows_the_shared_vocabulary_and_the_earlier_corpus_answers_as_before(memory):
    game_save(memory, turns=GAME[:6])
    config = RetrievalConfig()
    cache = CorpusCache(memory.store, memory._versions)
    before = cache.read("g", config).corpus
    old_view = cache.view(before, SearchFilter(), config)
    queries = [["key"], ["zephyr", "lantern"], ["tide", "storm", "bellwright"]]
    scores = {tuple(q): old_view.own_index.get_scores(q) for q in queries}
    size = len(before.vocab)
    memory.embed_chunks("g", [{"turn_id": n, "text": text} for n, text in enumerate(GAME[6:], start=7)])
    after = cache.read("g", config).corpus
    assert after.vocab is before.vocab and len(after.vocab) > size  # grown in place, not copied
    assert "zephyr" in before.vocab and len(before.ids) == 6  # the earlier corpus holds its own chunks only
    rebuilt = views.build_view(before, old_view.positions, config)  # what the earlier corpus gives now
    for query in queries:
        assert np.array_equal(rebuilt.own_index.get_scores(query), scores[tuple(query)])
        assert np.array_equal(old_view.own_index.get_scores(query), scores[tuple(query)])
    extended = cache.view(after, SearchFilter(), config)
    _assert_same_view(extended, views.build_view(after, extended.positions, config), after.vocab)
