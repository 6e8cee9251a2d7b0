"""Cross-encoder reranker: score normalisation, failure handling, lazy loading."""

from __future__ import annotations

import math

import pytest

from studio.memory.retrieval.reranker import CrossEncoderReranker


class ScriptedModel:
    def __init__(self, scores):
        self.scores = scores
        self.calls = []

    def predict(self, pairs):
        self.calls.append(list(pairs))
        return list(self.scores)


class BrokenModel:
    def predict(self, pairs):
        raise RuntimeError("native runtime crashed")


def test_logits_are_squashed_with_sigmoid():
    reranker = CrossEncoderReranker(model=ScriptedModel([2.0, -3.0, 0.0]))
    scores = reranker.rerank("who is Kaël?", ["a", "b", "c"])
    assert scores == pytest.approx([1 / (1 + math.exp(-2.0)), 1 / (1 + math.exp(3.0)), 0.5])
    assert all(0.0 <= s <= 1.0 for s in scores)


def test_very_negative_logits_do_not_overflow():
    scores = CrossEncoderReranker(model=ScriptedModel([-1000.0, 1000.0])).rerank("q", ["a", "b"])
    assert scores == pytest.approx([0.0, 1.0])


def test_calibrated_scores_pass_through():
    scores = CrossEncoderReranker(model=ScriptedModel([0.9, 0.1, 1.0, 0.0])).rerank("q", list("abcd"))
    assert scores == [0.9, 0.1, 1.0, 0.0]


def test_injected_model_receives_query_document_pairs():
    model = ScriptedModel([0.5, 0.6])
    CrossEncoderReranker(model=model).rerank("the query", ["doc one", "doc two"])
    assert model.calls == [[("the query", "doc one"), ("the query", "doc two")]]


def test_failure_returns_none():
    assert CrossEncoderReranker(model=BrokenModel()).rerank("q", ["a"]) is None


def test_wrong_number_of_scores_returns_none():
    assert CrossEncoderReranker(model=ScriptedModel([0.5])).rerank("q", ["a", "b"]) is None


def test_empty_documents_return_empty_scores_without_calling_the_model():
    model = ScriptedModel([])
    assert CrossEncoderReranker(model=model).rerank("q", []) == []
    assert model.calls == []


def test_unloadable_model_means_no_reranking(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    reranker = CrossEncoderReranker(model_name=str(tmp_path / "no-such-model"))
    assert reranker.rerank("q", ["a"]) is None
    assert reranker.available is False
    # The failed load is remembered: the second call does not retry the import.
    assert reranker.rerank("q", ["b"]) is None


def test_default_model_name():
    assert CrossEncoderReranker().model_name == "cross-encoder/ms-marco-MiniLM-L-6-v2"
