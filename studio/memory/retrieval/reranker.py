"""Optional cross-encoder reranking.

The retrieval arms (semantic embeddings and BM25) score a document independently of the
query's other terms. A cross-encoder reads the (query, document) pair jointly and judges
their relevance directly: the most accurate signal available, used as the final re-sort
after fusion, over a capped candidate pool (never the whole corpus).

Off by default, and a no-op when unavailable: the model (~90 MB,
cross-encoder/ms-marco-MiniLM-L-6-v2) has no offline weights here, so it is loaded lazily
from a configured name or local path (settings.AXIOM_RERANKER_MODEL) with the Hugging Face
hub offline; a missing or broken runtime or model means "no reranking", never a crash.

Algorithm reference: Hindsight (MIT, engine/search/reranking.py). Local
sentence-transformers cross-encoders return logits, squashed to [0, 1] with a sigmoid;
already calibrated [0, 1] scores are passed through.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from typing import Any

logger = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "cross-encoder/ms-marco-MiniLM-L-6-v2"


def _sigmoid(value: float) -> float:
    if value >= 0:
        return 1.0 / (1.0 + math.exp(-value))
    exp = math.exp(value)  # avoids overflow for very negative logits
    return exp / (1.0 + exp)


def normalize_scores(raw: list[float]) -> list[float]:
    """Return `raw` in [0, 1]: unchanged when already there, else squashed by a sigmoid."""
    if all(0.0 <= value <= 1.0 for value in raw):
        return list(raw)
    return [_sigmoid(value) for value in raw]


class CrossEncoderReranker:
    """Lazy wrapper around a sentence-transformers CrossEncoder.

    `model_name` is a Hugging Face id or a local directory; it is loaded on first use,
    offline. `model` is a pre-built object with a `predict(pairs)` method; injecting one
    bypasses loading entirely (used by tests to stay deterministic and offline).
    """

    def __init__(self, model_name: str = "cross-encoder/ms-marco-MiniLM-L-6-v2", model: object | None = None):
        self.model_name = model_name
        self._model = model
        self._load_failed = False
        self._lock = threading.Lock()

    def _get_model(self) -> Any | None:
        if self._model is not None:
            return self._model
        if self._load_failed:
            return None
        with self._lock:
            if self._model is None and not self._load_failed:
                try:
                    os.environ.setdefault("HF_HUB_OFFLINE", "1")
                    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                    from sentence_transformers import CrossEncoder

                    self._model = CrossEncoder(self.model_name, device="cpu")
                except Exception as exc:  # no runtime, no weights offline, broken install
                    logger.warning("Cross-encoder %r unavailable, reranking off: %s", self.model_name, exc)
                    self._load_failed = True
        return self._model

    @property
    def available(self) -> bool:
        """Return True when a model is loaded or can be loaded."""
        return self._get_model() is not None

    def rerank(self, query_text: str, documents: list[str]) -> list[float] | None:
        """Score each document's relevance to the query, in [0, 1].

        Return scores aligned 1:1 with `documents`, or None when the reranker is
        unavailable or fails (the caller then keeps the fused order).
        """
        if not documents:
            return []
        model = self._get_model()
        if model is None:
            return None
        try:
            raw = model.predict([(query_text, document) for document in documents])
            scores = [float(value) for value in raw]
        except Exception as exc:
            logger.warning("Cross-encoder failed, keeping the fused order: %s", exc)
            return None
        if len(scores) != len(documents) or any(math.isnan(value) for value in scores):
            logger.warning("Cross-encoder returned %d scores for %d documents", len(scores), len(documents))
            return None
        return normalize_scores(scores)
