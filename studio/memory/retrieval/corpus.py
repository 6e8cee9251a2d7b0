"""The corpus cache: per scope, every chunk's text, metadata and index terms, with BM25 views.

A search needs the whole filtered corpus of a scope for its lexical arms, and reading a
save from Chroma per query would cost more than the search. So each process keeps, per
scope, a `Corpus` (the chunks in turn, type and write order) and, per filter, a `View`
(the chunks passing it and their BM25 indexes: own text, neighbouring context, whole turn).

Invariants:
- A corpus is valid for exactly one corpus version. Every write bumps its scope's counter
  (`versions`: in the studio `studio.memory.corpus_log.DatabaseCorpusVersions`, one row per
  scope, so a worker process's write invalidates the web process's cache too; this package
  imports no Django); every read checks it (one indexed SELECT) and reloads only when it moved.
- A reload reads the change log since the cached version (changes.py: the ids each write
  added and removed, recorded with its bump) and fetches and tokenises only the added chunks
  by id: a turn's write costs the turn's chunks, never a listing of the save. Only when the
  log does not cover the window (a write that named nothing, a pruned log, versions without a
  log) are the scope's ids listed, and still only the chunks not seen are fetched (chunks are
  never modified in place). The new corpus records what changed (`CorpusDelta`).
- Views are immutable once built and keyed by their filter; a horizon that cuts nothing
  shares the unbounded view. At most `max_views_per_scope` views per scope and
  `max_cached_scopes` scopes per process are kept (LRU). Cached data is never mutated, so
  a search holding an old corpus or view stays consistent while another thread reloads.

Failure modes: the version read raises (database down) to the caller. When the store fails
during a reload and an older corpus of the scope is cached, that corpus answers
(`CorpusRead.store_error` says why; it may miss the newest chunks); with nothing cached the
error propagates. Without rank_bm25 a view has no indexes (the lexical arms skip).

Incremental views: each chunk's index terms are kept as term ids and counts over one
vocabulary per scope (append-only: shared by the corpora of one table, grown in place by an append at its
tip, copied when a reload starts a new table), and its context chain as a code
(`chain_codes`), so views are built with numpy (views.py). When a reload only appended chunks
after every cached one (a new turn's writes), the old corpus's views are carried forward and
each is extended (`views.extend_view`) the first time a query asks for it, instead of
rebuilt; the unbounded view also stands for the new corpus's view at the old last turn. When
it removed the cached tail (a rewind: every removed chunk after every kept one), possibly then
appended, the unbounded views are carried with the cut, and cut (`views.truncate_view`) then
extended on first use. Either touches only the last segments of each index (segments.py). Any other change (a chunk sorted before
existing ones, a removal in the middle: an old turn's narrative replaced, a lore sync) drops
the views (the epoch is the corpus version); the next query builds only the view it needs.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from studio.memory.retrieval import changes as change_log
from studio.memory.retrieval import lexical
from studio.memory.retrieval import store as store_module
from studio.memory.retrieval.changes import LocalCorpusVersions
from studio.memory.retrieval.config import RetrievalConfig
from studio.memory.retrieval.store import ChunkStore, is_store_failure, where_clause
from studio.memory.retrieval.table import ChunkTable
from studio.memory.retrieval.views import View, build_view, chain_codes_of, chain_key, extend_view, truncate_view

# Re-exported: callers read views through the cache; the in-process versions live in changes.py.
__all__ = ["LocalCorpusVersions", "View", "build_view"]

logger = logging.getLogger(__name__)


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
    # Views of an earlier version this one only appended to (after cutting its tail, for a
    # rewind): key -> Carried, extended on first use.
    earlier_views: dict = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Per chunk: the code of its context chain (views.chain_key: its chunk type, or its lore
    # entry), numbered by `chain_index` (append-only, like `vocab`); None: computed on first use.
    chain_codes: np.ndarray | None = None
    chain_index: dict = field(default_factory=dict)
    # Per chunk: its chunk type as a number of `type_index` (a filter on the type compares numbers, not strings);
    # None for a corpus built by hand (its `chunk_types` are compared).
    type_codes: np.ndarray | None = None
    type_index: dict = field(default_factory=dict)
    # Stored vectors of chunks an exact search read (arms.exact_nearest), by id: fetched once per
    # chunk, carried to the next corpus for the chunks it keeps (chunks never change in place).
    vectors: dict = field(default_factory=dict)
    # The storage the sequences above are prefixes of (table.py), shared with the corpora it was appended
    # for; None for a corpus built by hand (it is copied on its first append).
    table: Any = None

    def sort_key(self, position: int) -> tuple:
        return row_key(self.metadatas[position])


@dataclass(frozen=True)
class Carried:
    """A view of an earlier corpus, carried to a later one: cut to its chunks before `cut` (a
    rewind removed the rest), then extended."""

    view: View
    cut: int | None = None


@dataclass(frozen=True)
class CorpusRead:
    """The corpus a query reads, whether it was just (re)loaded, and the store error when stale."""

    corpus: Corpus
    rebuilt: bool = False
    store_error: str = ""


def index_terms(text: str, config: RetrievalConfig) -> list[str]:
    """Return the BM25 terms of `text` under the config's stop-word and folding switches."""
    return lexical.index_terms(text, stop_words=config.stop_words, fold_inflections=config.fold_inflections)


def row_key(metadata: dict[str, Any]) -> tuple:
    """The corpus order of a chunk: turn, chunk type, write order."""
    return int(metadata.get("turn_id", 0)), str(metadata.get("chunk_type", "")), metadata.get("chunk_seq", 0)


# --- The cache -----------------------------------------------------------------------------

Row = tuple  # (chunk id, text, metadata, index terms)


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
        """Return the scope's cached corpus, reloading it when its version moved.

        A reload applies the change log since the cached version when the versions keep one
        and it covers the whole window (only the added chunks are fetched); otherwise it lists
        the scope's ids (`_load_rows`).
        """
        version = self.versions.current(scope_id)
        with self._lock:
            cached = self._corpora.get(scope_id)
            if cached is not None and cached.version == version:
                self._corpora.move_to_end(scope_id)
                return CorpusRead(cached)
        try:
            corpus = None
            if cached is not None:
                changes = self._log_since(scope_id, cached, version)
                if changes is not None:
                    corpus = self._apply(scope_id, cached, changes, version, config)
            if corpus is None:
                rows, added = self._load_rows(scope_id, cached, config)
                corpus = self._build(rows, added, cached, version)
        except Exception as exc:
            if cached is None or not is_store_failure(exc):
                raise
            # The store is down: answer from the last corpus this process saw (it may miss
            # the newest chunks) rather than failing the whole query.
            logger.warning("vector store unreachable, querying the cached corpus of %s: %s", scope_id, exc)
            return CorpusRead(cached, store_error=f"{type(exc).__name__}: {exc}"[:300])
        with self._lock:
            self._corpora[scope_id] = corpus
            self._corpora.move_to_end(scope_id)
            while len(self._corpora) > config.max_cached_scopes:
                self._corpora.popitem(last=False)
        return CorpusRead(corpus, rebuilt=True)

    def ids_after(self, scope_id: str, turn: int) -> list[str] | None:
        """The ids of the scope's chunks after `turn` at the store's current version, from the corpus this process
        keeps and the change log since it (the chunks added since fetched by id for their turn); None when it
        keeps none or the log does not cover the window. The cached corpus is not reloaded: a rewind after a
        rewind would otherwise copy the corpus's lists to cut the first one's chunks (O(save))."""
        with self._lock:
            cached = self._corpora.get(scope_id)
        if cached is None:
            return None
        changes = self._log_since(scope_id, cached, self.versions.current(scope_id))
        if changes is None:
            return None
        added_ids, removed_ids = change_log.fold(changes, cached.position)
        ids = [
            chunk_id
            for chunk_id in (cached.ids[int(p)] for p in np.flatnonzero(np.asarray(cached.turn_ids) > turn))
            if chunk_id not in removed_ids
        ]
        ids += [
            chunk_id
            for chunk_id, _text, metadata in self._stored(scope_id, added_ids)
            if int((metadata or {}).get("turn_id", 0)) > turn
        ]
        return ids

    def _log_since(self, scope_id: str, cached: Corpus, version: int) -> list | None:
        """The logged changes from `cached`'s version to `version` ([] when equal; None when the versions keep no
        log or it does not cover the window)."""
        if version == cached.version:
            return []
        if not change_log.supports_log(self.versions):
            return None
        return self.versions.changes_since(scope_id, cached.version, version)

    def _stored(self, scope_id: str, ids: list[str]):
        """Yield (id, document, metadata) of the given chunks the store still holds, read a page at a time."""
        page_size = store_module.GET_PAGE_SIZE
        for start in range(0, len(ids), page_size):
            page = self.store.get_by_ids(scope_id, ids[start : start + page_size])
            yield from zip(page["ids"], page["documents"], page["metadatas"])

    def _fetch(self, scope_id: str, ids: list[str], config: RetrievalConfig) -> list[Row]:
        """Fetch and tokenise the given chunks (those the store still holds), a page at a time."""
        return [
            (chunk_id, text or "", metadata or {}, index_terms(text or "", config))
            for chunk_id, text, metadata in self._stored(scope_id, ids)
        ]

    def _apply(self, scope_id: str, cached: Corpus, changes: list, version: int, config: RetrievalConfig) -> Corpus:
        """Return the corpus at `version`: `cached` with the logged changes applied (O(change)).

        Appends after every cached chunk, after a cut of the cached tail (a rewind), extend the
        cached lists; any other change (a chunk sorted before cached ones, a removal in the
        middle) re-sorts the rows in memory, still without listing the store.
        """
        added_ids, removed_ids = change_log.fold(changes, cached.position)
        added = sorted(self._fetch(scope_id, added_ids, config), key=lambda row: row_key(row[2]))
        removed = sorted(cached.position[chunk_id] for chunk_id in removed_ids)
        cut = len(cached.ids) - len(removed)
        tail = removed == list(range(cut, len(cached.ids)))
        if not tail or (added and cut and row_key(added[0][2]) <= cached.sort_key(cut - 1)):
            gone = set(removed)
            rows = [
                (cached.ids[p], cached.texts[p], cached.metadatas[p], cached.terms[p])
                for p in range(len(cached.ids))
                if p not in gone
            ]
            return self._build(rows + added, [row[0] for row in added], cached, version, removed=len(removed))
        return self._extend(cached, cut, added, version)

    def _extend(self, cached: Corpus, cut: int, added: list[Row], version: int) -> Corpus:
        """Return `cached` cut to its first `cut` chunks, then `added` appended (in corpus order).

        A pure append to the corpus at its table's tip appends to the table in place (table.py);
        a cut, or a corpus another reload already appended to, copies the rows it keeps.
        """
        chain_index = dict(cached.chain_index)
        type_index = dict(cached.type_index)

        def added_rows(vocab: dict[str, int]) -> dict[str, list]:
            rows = {
                name: []
                for name in (
                    "ids",
                    "texts",
                    "metadatas",
                    "terms",
                    "term_ids",
                    "term_counts",
                    "turn_ids",
                    "chunk_types",
                    "type_codes",
                    "doc_lens",
                    "chain_codes",
                )
            }
            for chunk_id, text, metadata, terms in added:
                ids_of, counts_of = term_vector(terms, vocab)
                for name, value in (
                    ("ids", chunk_id),
                    ("texts", text),
                    ("metadatas", metadata),
                    ("terms", terms),
                    ("term_ids", ids_of),
                    ("term_counts", counts_of),
                    ("turn_ids", int(metadata.get("turn_id", 0))),
                    ("chunk_types", str(metadata.get("chunk_type", ""))),
                    ("type_codes", type_index.setdefault(str(metadata.get("chunk_type", "")), len(type_index))),
                    ("doc_lens", len(terms)),
                    ("chain_codes", chain_index.setdefault(chain_key(metadata, chunk_id), len(chain_index))),
                ):
                    rows[name].append(value)
            return rows

        table, size, rows = cached.table, None, None
        if table is not None and cut == len(cached.ids) and cached.type_codes is not None:
            with table.lock:
                if table.length == cut:  # `cached` is the tip: nobody appended after it
                    # The vocabulary grows in place too (not copied: ~3 ms at 100,000 chunks, whose turn numbers
                    # are terms): ids are only ever added, so the earlier corpora of the table, which share it,
                    # hold none of the new terms (a term no document holds scores nothing, counts nowhere).
                    vocab = cached.vocab
                    rows = added_rows(vocab)
                    size = table.append(rows)
        if size is None:
            vocab = dict(cached.vocab)
            rows = added_rows(vocab)
            table = ChunkTable()
            kept = {
                name: list(getattr(cached, name)[:cut])
                for name in ("ids", "texts", "metadatas", "terms", "term_ids", "term_counts")
            }
            types = [str(t) for t in cached.chunk_types[:cut]]
            kept.update(
                turn_ids=cached.turn_ids[:cut],
                chunk_types=types,
                type_codes=[type_index.setdefault(t, len(type_index)) for t in types],
                doc_lens=cached.doc_lens[:cut],
                chain_codes=chain_codes_of(cached)[:cut],
            )
            table.append(kept)
            size = table.append(rows)
        corpus = Corpus(
            version=version,
            vocab=vocab,
            chain_index=chain_index,
            type_index=type_index,
            table=table,
            delta=CorpusDelta(cached.version, tuple(rows["ids"]), len(cached.ids) - cut),
            **table.fields(size),
        )
        corpus.earlier_views = carried_views(cached, cut if cut < len(cached.ids) else None)
        corpus.vectors = kept_vectors(cached, corpus.position)
        return corpus

    def _build(
        self, rows: list[Row], added: list[str], cached: Corpus | None, version: int, *, removed: int | None = None
    ) -> Corpus:
        """Return the corpus of `rows` (sorted here), reusing the cached chunks' term vectors."""
        rows.sort(key=lambda row: row_key(row[2]))
        ids = [row[0] for row in rows]
        metadatas = [row[2] or {} for row in rows]
        vocab = {} if cached is None else dict(cached.vocab)
        chain_index = {} if cached is None else dict(cached.chain_index)
        term_ids, term_counts, codes = [], [], []
        for chunk_id, _text, metadata, terms in rows:
            position = None if cached is None else cached.position.get(chunk_id)
            if position is not None:
                term_ids.append(cached.term_ids[position])
                term_counts.append(cached.term_counts[position])
            else:
                ids_of, counts_of = term_vector(terms, vocab)
                term_ids.append(ids_of)
                term_counts.append(counts_of)
            codes.append(chain_index.setdefault(chain_key(metadata, chunk_id), len(chain_index)))
        if removed is None and cached is not None:
            removed = len(cached.ids) - (len(ids) - len(added))
        table = ChunkTable()
        types = [str(m.get("chunk_type", "")) for m in metadatas]
        type_index = {} if cached is None else dict(cached.type_index)
        size = table.append(
            {
                "ids": ids,
                "texts": [row[1] or "" for row in rows],
                "metadatas": metadatas,
                "terms": [row[3] for row in rows],
                "term_ids": term_ids,
                "term_counts": term_counts,
                "turn_ids": [int(m.get("turn_id", 0)) for m in metadatas],
                "chunk_types": types,
                "type_codes": [type_index.setdefault(t, len(type_index)) for t in types],
                "doc_lens": [len(row[3]) for row in rows],
                "chain_codes": codes,
            }
        )
        corpus = Corpus(
            version=version,
            vocab=vocab,
            chain_index=chain_index,
            type_index=type_index,
            table=table,
            delta=None if cached is None else CorpusDelta(cached.version, tuple(added), removed),
            **table.fields(size),
        )
        if cached is not None and corpus.delta.removed == 0 and ids[: len(cached.ids)] == cached.ids:
            corpus.earlier_views = carried_views(cached)
        if cached is not None:
            corpus.vectors = kept_vectors(cached, corpus.position)
        return corpus

    def _load_rows(self, scope_id: str, cached: Corpus | None, config: RetrievalConfig) -> tuple[list[Row], list[str]]:
        """Return (id, text, metadata, index terms) of every chunk in the scope, and the new ids.

        The fallback when no change log covers the window: with an older cached corpus at
        hand only the ids are listed, and just the new chunks are fetched and tokenised
        (chunks are never modified in place: a change is a new id plus a deleted one).
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
        fetched = self._fetch(scope_id, missing, config)
        return rows + fetched, [row[0] for row in fetched]

    def view(self, corpus: Corpus, filters: SearchFilter, config: RetrievalConfig) -> View:
        """Return the corpus's view for `filters`, building and caching it on first use."""
        mask = np.ones(len(corpus.ids), dtype=bool)
        for wanted, keep in ((filters.chunk_type, True), (filters.exclude_chunk_type, False)):
            if wanted is None:
                continue
            if corpus.type_codes is None:  # a corpus built by hand: its strings compared
                same = corpus.chunk_types == wanted
            else:  # numbers compared: a string comparison per chunk of a long save costs ~5 ms
                code = corpus.type_index.get(wanted)
                same = corpus.type_codes == code if code is not None else np.zeros(len(mask), dtype=bool)
            mask &= same if keep else ~same
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
            view = None
            carried = corpus.earlier_views.pop(key, None)
            if carried is not None:
                earlier = carried.view
                if carried.cut is not None:
                    kept = int(np.searchsorted(earlier.positions, carried.cut))
                    earlier = truncate_view(earlier, corpus, kept, config)
                if np.array_equal(positions[: len(earlier.positions)], earlier.positions):
                    view = extend_view(earlier, corpus, positions, config)
            if view is None:
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
    return np.fromiter(counts, dtype=np.int64, count=len(counts)), np.fromiter(
        counts.values(), dtype=np.int64, count=len(counts)
    )


def kept_vectors(cached: Corpus, position: dict[str, int]) -> dict:
    """The cached corpus's fetched vectors of the chunks the new corpus keeps."""
    with cached.lock:
        return {chunk_id: vector for chunk_id, vector in cached.vectors.items() if chunk_id in position}


CARRIED_VIEWS = 16


def carried_views(cached: Corpus, cut: int | None = None) -> dict:
    """The views of `cached` a corpus appending to it can extend (keyed as that corpus keys them).

    `cut`: the new corpus keeps only `cached`'s chunks before this position (a rewind removed
    the rest); a view carried from further back keeps the smallest cut. The unbounded view of a
    key also stands for the new corpus's view at the old last turn (the horizon that then cuts
    exactly the appended chunks).
    """
    with cached.lock:
        carried = dict(cached.earlier_views)
        carried.update({key: Carried(view) for key, view in cached.views.items()})
    if cut is not None:
        for key, item in list(carried.items()):
            carried[key] = Carried(item.view, cut if item.cut is None else min(item.cut, cut))
    if cut is None and len(cached.turn_ids):
        last_turn = int(cached.turn_ids.max())
        for (chunk_type, exclude, horizon), item in list(carried.items()):
            if horizon is None:
                carried.setdefault((chunk_type, exclude, last_turn), item)
    elif cut is not None:
        # After a cut, a view bounded by a horizon may now cut nothing (and is keyed unbounded):
        # only the unbounded views are carried.
        carried = {key: item for key, item in carried.items() if key[2] is None}
    # Views nobody asked for are carried at most this far (each append adds an alias).
    return dict(list(carried.items())[-CARRIED_VIEWS:])
