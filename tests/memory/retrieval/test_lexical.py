"""BM25 arm: tokenizer, index terms, the postings scorer and the ranking helpers."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from studio.memory.retrieval import lexical
from studio.memory.retrieval.lexical import (
    build_bm25,
    index_terms,
    is_available,
    rank_by_bm25,
    rank_with_bm25,
    tokenize,
)


def test_tokenize_lowercases_and_splits_on_punctuation_and_underscore():
    assert tokenize("Hello, WORLD! snake_case-word x2") == ["hello", "world", "snake", "case", "word", "x2"]
    assert tokenize("") == []
    assert tokenize("  ...!!! ") == []


def test_tokenize_keeps_accented_name_as_one_token():
    assert tokenize("Kaël drew his blade.") == ["kaël", "drew", "his", "blade"]
    # A decomposed e + combining diaeresis is the same token as the precomposed one.
    assert tokenize("Kae\u0308l") == ["kaël"]
    assert tokenize("Ça s'est passé à Besançon") == ["ça", "s", "est", "passé", "à", "besançon"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Привет, Мир!", ["привет", "мир"]),  # Cyrillic
        ("Γειά σου Κόσμε", ["γειά", "σου", "κόσμε"]),  # Greek
        ("مرحبا بالعالم", ["مرحبا", "بالعالم"]),  # Arabic
        ("नमस्ते दुनिया", ["नमस्ते", "दुनिया"]),  # Devanagari: vowel signs stay in the word
        ("שלום עולם", ["שלום", "עולם"]),  # Hebrew
        ("한국어 문장", ["한국어", "문장"]),  # Hangul (space-delimited)
        ("สวัสดี", ["สวัสดี"]),  # Thai: tone marks are combining marks, kept
    ],
)
def test_tokenize_non_latin_scripts(text, expected):
    assert tokenize(text) == expected


def test_tokenize_splits_chinese_and_japanese_into_characters():
    assert tokenize("我喜欢猫") == ["我", "喜", "欢", "猫"]
    assert tokenize("Kaëlは猫が好き") == ["kaël", "は", "猫", "が", "好", "き"]


def test_tokenize_is_deterministic():
    text = "Kaël, Zoë & 我: the same text twice"
    assert tokenize(text) == tokenize(text)


def test_index_terms_drop_stop_words_and_fold_inflections():
    assert index_terms("What did Melanie paint?") == index_terms("melanie paints") == ["melani", "paint"]
    assert index_terms("She painted") == index_terms("painting") == ["paint"]
    assert index_terms("baked") == index_terms("bake") == index_terms("baking")
    assert index_terms("churches") == ["church"]
    # Short words, accented words and other scripts are not folded.
    assert index_terms("Kaël's bus") == ["kaël", "bus"]
    assert index_terms("Les épées") == ["épées"]
    assert index_terms("the and of what did you") == []


def test_rank_by_bm25_orders_by_relevance_and_drops_zero_scores():
    ids = ["d1", "d2", "d3", "d4", "d5", "d6"]
    texts = [
        "the harbour at Port Vey",
        "Kaël and Kaël's crew at Port Vey",
        "a quiet mountain village",
        "Kaël is a smuggler who trades salt and rum",
        "rain over the hills",
        "an old lighthouse",
    ]
    ranked = rank_by_bm25("Kaël", ids, texts)
    assert ranked == ["d2", "d4"]  # two mentions beat one; no overlap -> dropped
    assert "d3" not in rank_by_bm25("Port Vey", ids, texts)


def test_rank_by_bm25_empty_when_query_has_no_usable_tokens():
    ids, texts = ["a", "b", "c"], ["red fox", "blue fox", "green owl"]
    assert rank_by_bm25("", ids, texts) == []
    assert rank_by_bm25("?!", ids, texts) == []
    assert rank_by_bm25("the of and", ids, texts) == []


def test_rank_by_bm25_ties_keep_input_order():
    # BM25Okapi gives a term found in exactly half the documents an IDF of 0, hence the
    # filler documents.
    ids = ["x", "y", "z", "w", "v"]
    texts = ["owl tree", "fox den", "owl tree", "stone", "river"]
    assert rank_by_bm25("owl", ids, texts) == ["x", "z"]
    assert rank_by_bm25("owl", ["z", "y", "x", "w", "v"], texts) == ["z", "x"]


def test_rank_with_bm25_none_index_and_misaligned_input():
    assert rank_with_bm25(None, "fox", ["a"]) == []
    with pytest.raises(ValueError):
        rank_by_bm25("fox", ["a"], ["fox", "owl"])


def test_build_bm25_empty_corpus_is_none():
    assert build_bm25([]) is None


def test_rank_with_bm25_top_n_equals_head_of_full_ranking():
    rng = random.Random(7)
    words = [f"w{i}" for i in range(40)]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 15))) for _ in range(300)]
    ids = [f"id{i}" for i in range(300)]
    bm25 = build_bm25(texts)
    full = rank_with_bm25(bm25, "w1 w2 w3", ids)
    for n in (1, 5, 17, 1000):
        assert rank_with_bm25(bm25, "w1 w2 w3", ids, top_n=n) == full[:n]


def test_postings_scores_equal_bm25okapi_exactly():
    rng = random.Random(11)
    vocab = [f"t{i}" for i in range(60)] + ["kaël", "猫"]
    corpus = [[rng.choice(vocab) for _ in range(rng.randint(1, 30))] for _ in range(500)]
    reference = BM25Okapi(corpus)
    fast = lexical.PostingsBM25(corpus)
    for query in (["t1"], ["t1", "t2", "t1"], ["kaël", "猫", "t59"], ["unknown"], vocab[:20]):
        assert np.array_equal(fast.get_scores(query), reference.get_scores(query))
    assert fast.get_batch_scores(["t3", "t4"], [0, 5, 9]) == pytest.approx(
        reference.get_batch_scores(["t3", "t4"], [0, 5, 9])
    )


@given(
    corpus=st.lists(st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=12), min_size=1, max_size=40),
    query=st.lists(st.sampled_from("abcdefghij"), min_size=1, max_size=6),
)
def test_postings_scores_equal_bm25okapi_property(corpus, query):
    assert np.array_equal(lexical.PostingsBM25(corpus).get_scores(query), BM25Okapi(corpus).get_scores(query))


def test_build_bm25_uses_index_terms():
    texts = ["Melanie painted a sunrise", "Caroline went hiking", "The lake at dawn"]
    bm25 = build_bm25(texts)
    assert isinstance(bm25, BM25Okapi)
    assert rank_with_bm25(bm25, "When did Melanie paint?", ["m", "c", "l"]) == ["m"]


def test_without_backend_the_lexical_arm_is_absent(monkeypatch):
    monkeypatch.setattr(lexical, "_BM25Okapi", None)
    assert is_available() is False
    assert build_bm25(["fox"]) is None
    assert rank_by_bm25("fox", ["a", "b", "c"], ["fox", "owl", "cat"]) == []


def test_aggregated_bm25_equals_bm25okapi_on_concatenated_documents():
    rng = random.Random(5)
    vocab = [f"t{i}" for i in range(30)]
    base = [[rng.choice(vocab) for _ in range(rng.randint(1, 8))] for _ in range(60)]
    window = 2
    # Context documents: each base document with its neighbours within `window`.
    targets_of = [list(range(max(0, d - window), min(len(base), d + window + 1))) for d in range(len(base))]
    indptr = np.concatenate([[0], np.cumsum([len(t) for t in targets_of])])
    targets = np.asarray([t for ts in targets_of for t in ts])
    concatenated = [
        [term for d in range(len(base)) if i in targets_of[d] for term in base[d]] for i in range(len(base))
    ]
    reference = BM25Okapi(concatenated, k1=1.5, b=0.5)
    aggregated = lexical.AggregatedBM25(lexical.PostingsBM25(base), indptr, targets, len(base), k1=1.5, b=0.5)
    for query in (["t1"], ["t2", "t3", "t2"], vocab, ["nope"]):
        assert np.allclose(aggregated.get_scores(query), reference.get_scores(query), rtol=1e-12, atol=1e-12)
    # Groups (e.g. whole turns): every base document feeds exactly one target.
    group_of = np.asarray([d // 7 for d in range(len(base))])
    groups = [
        [term for d in range(len(base)) if group_of[d] == g for term in base[d]] for g in range(group_of.max() + 1)
    ]
    aggregated = lexical.AggregatedBM25(
        lexical.PostingsBM25(base), np.arange(len(base) + 1), group_of, len(groups), k1=1.5, b=0.5
    )
    reference = BM25Okapi(groups, k1=1.5, b=0.5)
    assert np.allclose(aggregated.get_scores(vocab[:10]), reference.get_scores(vocab[:10]), rtol=1e-12, atol=1e-12)


def _reference_ranking(scores: np.ndarray, top_n: int | None) -> list[int]:
    """Non-zero scores, best first, ties in input order: a plain sort."""
    ranked = sorted((i for i in range(len(scores)) if scores[i] != 0), key=lambda i: (-scores[i], i))
    return ranked[:top_n] if top_n else ranked


@pytest.mark.parametrize(
    "shape", ["random", "ties", "ascending", "descending", "one_high_run", "sampled_high", "sampled_low"]
)
def test_the_top_n_of_a_long_score_array_equals_a_full_sort(shape):
    """`nth_largest` guesses the n-th score from a sample first (long arrays): whatever the guess, the ranking is
    the full sort's. `sampled_high` defeats the strided sample: the sampled scores are the best ones, so the
    guess is too high (fewer than n scores reach it) and every score is searched; `sampled_low`: the sampled
    scores are the worst, the guess far too low."""
    rng = np.random.default_rng(7)
    count = 20_000
    sampled = np.arange(count) % lexical.SAMPLE_STEP == 0
    scores = {
        "random": rng.gamma(2.0, 1.0, count),
        "ties": np.round(rng.gamma(2.0, 1.0, count), 1),
        "ascending": np.sort(rng.random(count)),
        "descending": np.sort(rng.random(count))[::-1].copy(),
        "one_high_run": np.concatenate([rng.random(count - 300) * 0.1, 5.0 + rng.random(300)]),
        "sampled_high": np.where(sampled, 10.0 + rng.random(count), rng.random(count)),
        "sampled_low": np.where(sampled, 0.01, 1.0 + rng.random(count)),
    }[shape]
    if not shape.startswith("sampled"):  # documents no query term reaches (the sampled shapes keep their order)
        scores[rng.choice(count, count // 4, replace=False)] = 0.0
    for top_n in (1, 50, 150, 300, None):
        assert lexical.ranked_indices(scores, top_n).tolist() == _reference_ranking(scores, top_n)


@given(
    st.lists(st.sampled_from([0.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.25]), min_size=1, max_size=400),
    st.integers(min_value=1, max_value=40),
)
def test_nth_largest_with_a_small_sample_threshold(values, top_n):
    """The sampled path on short arrays (its thresholds lowered): the same ranking as a full sort."""
    scores = np.asarray(values)
    saved = lexical.SAMPLE_FROM, lexical.SAMPLE_STEP
    lexical.SAMPLE_FROM, lexical.SAMPLE_STEP = 8, 2
    try:
        assert lexical.ranked_indices(scores, top_n).tolist() == _reference_ranking(scores, top_n)
    finally:
        lexical.SAMPLE_FROM, lexical.SAMPLE_STEP = saved
