"""Reciprocal Rank Fusion and the per-arm cap."""

from __future__ import annotations

import pytest

from studio.memory.retrieval.fusion import cap_per_source, reciprocal_rank_fusion


def test_rrf_formula_sums_one_over_k_plus_rank():
    fused = dict(reciprocal_rank_fusion([["a", "b", "c"], ["c", "a"]], k=60))
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["b"] == pytest.approx(1 / 62)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)


def test_rrf_sorts_by_score_descending():
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "b", "a"], ["b"]])
    assert [doc for doc, _ in fused] == ["b", "a", "c"]
    scores = [score for _, score in fused]
    assert scores == sorted(scores, reverse=True)


def test_rrf_default_k_is_60():
    assert reciprocal_rank_fusion([["x"]]) == [("x", pytest.approx(1 / 61))]


def test_rrf_smaller_k_sharpens_top_ranks():
    flat = dict(reciprocal_rank_fusion([["a", "b"]], k=1000))
    sharp = dict(reciprocal_rank_fusion([["a", "b"]], k=1))
    assert sharp["a"] / sharp["b"] > flat["a"] / flat["b"]


def test_rrf_ties_follow_first_appearance_across_lists():
    # a is rank 1 in the first arm, z rank 1 in the second: equal scores, a appeared first.
    fused = reciprocal_rank_fusion([["a", "b"], ["z", "y"]])
    assert [doc for doc, _ in fused] == ["a", "z", "b", "y"]
    # The same inputs swapped give the swapped order: the tie-break is the input order.
    fused = reciprocal_rank_fusion([["z", "y"], ["a", "b"]])
    assert [doc for doc, _ in fused] == ["z", "a", "y", "b"]


def test_rrf_is_deterministic_for_identical_inputs():
    lists = [[f"d{i}" for i in range(50)], [f"d{i}" for i in range(49, -1, -1)]]
    assert reciprocal_rank_fusion(lists) == reciprocal_rank_fusion([list(x) for x in lists])


def test_rrf_absent_document_contributes_nothing_and_empty_inputs():
    assert reciprocal_rank_fusion([]) == []
    assert reciprocal_rank_fusion([[], []]) == []
    assert dict(reciprocal_rank_fusion([["a"], []]))["a"] == pytest.approx(1 / 61)


def test_rrf_weights_scale_each_arm():
    fused = dict(reciprocal_rank_fusion([["a"], ["b"]], weights=[2.0, 1.0]))
    assert fused["a"] == pytest.approx(2 / 61)
    assert fused["b"] == pytest.approx(1 / 61)
    with pytest.raises(ValueError):
        reciprocal_rank_fusion([["a"], ["b"]], weights=[1.0])


def test_cap_per_source_slices_top_ids():
    assert cap_per_source(["a", "b", "c", "d"], 2) == ["a", "b"]
    assert cap_per_source(["a", "b"], 5) == ["a", "b"]


@pytest.mark.parametrize("cap", [0, -1, -100])
def test_cap_per_source_non_positive_disables(cap):
    ids = ["a", "b", "c"]
    assert cap_per_source(ids, cap) == ids


def test_cap_per_source_does_not_alias_input():
    ids = ["a", "b"]
    capped = cap_per_source(ids, 0)
    capped.append("c")
    assert ids == ["a", "b"]
