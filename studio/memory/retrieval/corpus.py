"""The corpus cache: per scope, every chunk's text, metadata and index terms, with BM25 views.

A search needs the whole filtered corpus of a scope for its lexical arms, and reading a
save from Chroma per query would cost more than the search. So each process keeps, per
scope, a `Corpus` (the chunks in turn, type and write order) and, per filter, a `View`
(the chunks passing it and their BM25 indexes: own text, neighbouring context, whole turn).

Invariants:
- A corpus is valid for exactly one corpus version. Every write bumps its scope's counter
  (`versions`: in the studio `studio.memory.vector.DatabaseCorpusVersions`, one row per
  scope, so a worker process's write invalidates the web process's cache too; this package
  imports no Django); every read checks it (one indexed SELECT) and reloads only when it moved.
- A reload lists the scope's ids and fetches and tokenises only the chunks it has not seen
  (chunks are never modified in place), so a turn's write costs a page of ids, not the
  save. The new corpus records what changed (`CorpusDelta`).
- Views are immutable once built and keyed by their filter; a horizon that cuts nothing
  shares the unbounded view. At most `max_views_per_scope` views per scope and
  `max_cached_scopes` scopes per process are kept (LRU). Cached data is never mutated, so
  a search holding an old corpus or view stays consistent while another thread reloads.

Failure modes: the version read raises (database down) to the caller. When the store fails
during a reload and an older corpus of the scope is cached, that corpus answers
(`CorpusRead.store_error` says why; it may miss the newest chunks); with nothing cached the
error propagates. Without rank_bm25 a view has no indexes (the lexical arms skip).

Incremental views: each chunk's index terms are kept as term ids and counts over one
vocabulary per scope (append-only, copied forward on reload), so views are built with numpy
(views.py). When a reload only appended chunks after every cached one (a new turn's
writes: `CorpusDelta.removed == 0` and the old ids are the new corpus's prefix), the old
corpus's views are carried forward and each is extended (`views.extend_view`) the first
time a query asks for it, instead of rebuilt; the unbounded view also stands for the new
corpus's view at the old last turn. A removal (rewind, a replaced narrative) or a chunk
sorted before existing ones drops the views (the epoch is the corpus version); the next
query builds only the view it needs.
"""
from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from studio.memory.retrieval import lexical
from studio.memory.retrieval import store as store_module
from studio.memory.retrieval.config import RetrievalConfig
from studio.memory.retrieval.store import ChunkStore, is_store_failure, where_clause
from studio.memory.retrieval.views import View, build_view, extend_view

__all__ = ["View", "build_view"]  # re-exported: callers read views through the cache

logger = logging.getLogger(__name__)


# --- Per-scope corpus version (cache invalidation across processes) ----------------------


class LocalCorpusVersions:
    """In-process counters, for use without a database (one process only)."""

    def __init__(self) -> None:
        self._versions: dict[str, int] = {}
        self._lock = threading.Lock()

    def current(self, scope_id: str) -> int:
        return self._versions.get(scope_id, 0)

    def bump(self, scope_id: str) -> int:
        with self._lock:
            self._versions[scope_id] = self._versions.get(scope_id, 0) + 1
            return self._versions[scope_id]


# --- Filters, corpus and views -------------------------------------------------------------


@dataclass(frozen=True)
class SearchFilter:
    """Which chunks of a scope a query reads: a turn horizon and a chunk type to keep or drop."""

    horizon: int | None = None
    chunk_type: str | None = None
    exclude_chunk_type: str | None = None

    @classmethod
    def for_query(
        cls,
        current_turn_id: int | None = None,
        max_turn_id: int | None = None,
        chunk_type: str | None = None,
        exclude_chunk_type: str | None = None,
    ) -> SearchFilter:
        """Return the filter of a query: the horizon is min(current_turn_id, max_turn_id) when given."""
        bounds = [int(bound) for bound in (current_turn_id, max_turn_id) if bound is not None]
        return cls(min(bounds) if bounds else None, chunk_type, exclude_chunk_type)

    def chroma_where(self) -> dict[str, Any] | None:
        """The `where` of a scope's collection (the save needs no condition: it is the collection)."""
        conditions: list[dict[str, Any]] = []
        if self.horizon is not None:
            conditions.append({"turn_id": {"$lte": int(self.horizon)}})
        if self.chunk_type is not None:
            conditions.append({"chunk_type": str(self.chunk_type)})
        if self.exclude_chunk_type is not None:
            conditions.append({"chunk_type": {"$ne": str(self.exclude_chunk_type)}})
        return where_clause(conditions)


@dataclass(frozen=True)
class CorpusDelta:
    """What a reload changed: the version it started from, the ids fetched, how many left."""

    base_version: int
    added_ids: tuple[str, ...]
    removed: int


@dataclass
class Corpus:
    """One scope's chunks at one version, ordered by (turn, chunk type, write order)."""

    version: int
    ids: list[str]
    texts: list[str]
    metadatas: list[dict[str, Any]]
    turn_ids: np.ndarray
    chunk_types: np.ndarray
    position: dict[str, int]
    terms: list[list[str]]
    vocab: dict[str, int] = field(default_factory=dict)  # the scope's term ids (append-only)
    term_ids: list[np.ndarray] = field(default_factory=list)  # per chunk: its distinct term ids
    term_counts: list[np.ndarray] = field(default_factory=list)  # per chunk: their counts
    doc_lens: np.ndarray = None  # per chunk: its number of terms
    delta: CorpusDelta | None = None  # None: loaded from scratch
    views: OrderedDict = field(default_factory=OrderedDict)
    # Views of an earlier version this one only appended to: extended on first use.
    earlier_views: dict = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True)
class CorpusRead:
    """The corpus a query reads, whether it was just (re)loaded, and the store error when stale."""

    corpus: Corpus
    rebuilt: bool = False
    store_error: str = ""


def index_terms(text: str, config: RetrievalConfig) -> list[str]:
    """Return the BM25 terms of `text` under the config's stop-word and folding switches."""
    return lexical.index_terms(text, stop_words=config.stop_words, fold_inflections=config.fold_inflections)


# --- The cache -----------------------------------------------------------------------------


class CorpusCache:
    """Per-process cache of the scopes' corpora (LRU), thread-safe, reloaded by version."""

    def __init__(self, store: ChunkStore, versions: Any) -> None:
        self.store = store
        self.versions = versions
        self._corpora: OrderedDict[str, Corpus] = OrderedDict()
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Drop every cached corpus and view (the next query of each scope reloads)."""
        with self._lock:
            self._corpora.clear()

    def read(self, scope_id: str, config: RetrievalConfig) -> CorpusRead:
        """Return the scope's cached corpus, reloading it when its version moved."""
        version = self.versions.current(scope_id)
        with self._lock:
            cached = self._corpora.get(scope_id)
            if cached is not None and cached.version == version:
                self._corpora.move_to_end(scope_id)
                return CorpusRead(cached)
        try:
            rows, added = self._load_rows(scope_id, cached, config)
        except Exception as exc:
            if cached is None or not is_store_failure(exc):
                raise
            # The store is down: answer from the last corpus this process saw (it may miss
            # the newest chunks) rather than failing the whole query.
            logger.warning("vector store unreachable, querying the cached corpus of %s: %s", scope_id, exc)
            return CorpusRead(cached, store_error=f"{type(exc).__name__}: {exc}"[:300])
        rows.sort(
            key=lambda row: (int(row[2].get("turn_id", 0)), str(row[2].get("chunk_type", "")), row[2].get("chunk_seq", 0)),
        )
        ids = [row[0] for row in rows]
        metadatas = [row[2] or {} for row in rows]
        vocab = {} if cached is None else dict(cached.vocab)
        term_ids, term_counts = [], []
        for chunk_id, _text, _metadata, terms in rows:
            position = None if cached is None else cached.position.get(chunk_id)
            if position is not None:
                term_ids.append(cached.term_ids[position])
                term_counts.append(cached.term_counts[position])
            else:
                ids_of, counts_of = term_vector(terms, vocab)
                term_ids.append(ids_of)
                term_counts.append(counts_of)
        corpus = Corpus(
            version=version,
            ids=ids,
            texts=[row[1] or "" for row in rows],
            metadatas=metadatas,
            turn_ids=np.asarray([int(m.get("turn_id", 0)) for m in metadatas], dtype=np.int64),
            chunk_types=np.asarray([str(m.get("chunk_type", "")) for m in metadatas], dtype=object),
            position={chunk_id: index for index, chunk_id in enumerate(ids)},
            terms=[row[3] for row in rows],
            vocab=vocab,
            term_ids=term_ids,
            term_counts=term_counts,
            doc_lens=np.asarray([len(row[3]) for row in rows], dtype=np.int64),
            delta=None if cached is None else CorpusDelta(
                cached.version, tuple(added), len(cached.ids) - (len(ids) - len(added))
            ),
        )
        if cached is not None and corpus.delta.removed == 0 and ids[: len(cached.ids)] == cached.ids:
            corpus.earlier_views = carried_views(cached)
        with self._lock:
            self._corpora[scope_id] = corpus
            self._corpora.move_to_end(scope_id)
            while len(self._corpora) > config.max_cached_scopes:
                self._corpora.popitem(last=False)
        return CorpusRead(corpus, rebuilt=True)

    def _load_rows(
        self, scope_id: str, cached: Corpus | None, config: RetrievalConfig
    ) -> tuple[list[tuple[str, str, dict, list[str]]], list[str]]:
        """Return (id, text, metadata, index terms) of every chunk in the scope, and the new ids.

        With an older cached corpus at hand only the ids are listed, and just the new
        chunks are fetched and tokenised (chunks are never modified in place: a change is
        a new id plus a deleted one), so a turn's write costs a page of ids, not the save.
        """
        if cached is None:
            page = self.store.get_paged(scope_id, None, include=["documents", "metadatas"])
            rows = [
                (chunk_id, text or "", metadata or {}, index_terms(text or "", config))
                for chunk_id, text, metadata in zip(page["ids"], page["documents"], page["metadatas"])
            ]
            return rows, []  # a first load has no delta
        current = self.store.get_paged(scope_id, None, include=[])["ids"]
        rows = []
        missing = []
        for chunk_id in current:
            position = cached.position.get(chunk_id)
            if position is None:
                missing.append(chunk_id)
            else:
                rows.append((chunk_id, cached.texts[position], cached.metadatas[position], cached.terms[position]))
        added = []
        page_size = store_module.GET_PAGE_SIZE
        for start in range(0, len(missing), page_size):
            page = self.store.get_by_ids(scope_id, missing[start : start + page_size])
            for chunk_id, text, metadata in zip(page["ids"], page["documents"], page["metadatas"]):
                rows.append((chunk_id, text or "", metadata or {}, index_terms(text or "", config)))
                added.append(chunk_id)
        return rows, added

    def view(self, corpus: Corpus, filters: SearchFilter, config: RetrievalConfig) -> View:
        """Return the corpus's view for `filters`, building and caching it on first use."""
        mask = np.ones(len(corpus.ids), dtype=bool)
        if filters.chunk_type is not None:
            mask &= corpus.chunk_types == filters.chunk_type
        if filters.exclude_chunk_type is not None:
            mask &= corpus.chunk_types != filters.exclude_chunk_type
        horizon = filters.horizon
        if horizon is not None:
            in_horizon = corpus.turn_ids <= horizon
            if not np.all(in_horizon[mask]):
                mask &= in_horizon
            else:
                horizon = None  # the horizon cuts nothing: share the unbounded view
        key = (filters.chunk_type, filters.exclude_chunk_type, horizon)
        with corpus.lock:
            view = corpus.views.get(key)
            if view is not None:
                corpus.views.move_to_end(key)
                return view
            positions = np.flatnonzero(mask)
            earlier = corpus.earlier_views.pop(key, None)
            if earlier is not None and np.array_equal(positions[: len(earlier.positions)], earlier.positions):
                view = extend_view(earlier, corpus, positions, config)
            else:
                view = build_view(corpus, positions, config)
            corpus.views[key] = view
            while len(corpus.views) > config.max_views_per_scope:
                corpus.views.popitem(last=False)
            return view


def term_vector(terms: list[str], vocab: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """Return a chunk's distinct term ids (new terms numbered into `vocab`) and their counts."""
    counts: dict[int, int] = {}
    for term in terms:
        term_id = vocab.setdefault(term, len(vocab))
        counts[term_id] = counts.get(term_id, 0) + 1
    return np.fromiter(counts, dtype=np.int64, count=len(counts)), np.fromiter(counts.values(), dtype=np.int64, count=len(counts))


CARRIED_VIEWS = 16


def carried_views(cached: Corpus) -> dict:
    """The views of `cached` a corpus appending to it can extend (keyed as that corpus keys them).

    The unbounded view of a key also stands for the new corpus's view at the old last turn
    (the horizon that then cuts exactly the appended chunks).
    """
    with cached.lock:
        carried = {**cached.earlier_views, **cached.views}
    if len(cached.turn_ids):
        last_turn = int(cached.turn_ids.max())
        for (chunk_type, exclude, horizon), view in list(carried.items()):
            if horizon is None:
                carried.setdefault((chunk_type, exclude, last_turn), view)
    # Views nobody asked for are carried at most this far (each append adds an alias).
    return dict(list(carried.items())[-CARRIED_VIEWS:])
