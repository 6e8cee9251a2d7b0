"""Vector memory for narrative chunks: the engine's `axiom.memory`, a facade over retrieval/.

Every chunk carries a turn_id, which makes rewinding surgical: rolling a save back to turn
N deletes every chunk with turn_id > N, so nothing from the abandoned timeline bleeds into
the rebuilt one. Lore entries are chunks of turn 0 and survive every rewind.

`VectorMemory` is the seed's class (../shared/seed/memory-engine-api.txt, checked by
seed_api_check.py) and the only entry point callers use; the work is done in
studio/memory/retrieval/ (docs/retrieval.md, "Module map"):
- store.py: the Chroma client, its process lock, one collection per scope, the legacy move;
- chunks.py: the chunk record (metadata, splitting long texts, the result row);
- corpus.py: corpus versions and the per-process corpus cache with its BM25 views;
- arms.py, search.py, explain.py: the arms, the fused search, the explain records;
- config.py: RetrievalConfig, the measured knobs.
This module re-exports the names callers import from it (VectorStoreError,
RetrievalConfig, QueryStats, scope_collection_name, COLLECTION_NAME, ...), and those of
vector_settings.py, what ties it to the project: the corpus versions in the database and the
store, reranker and pool the settings choose (the process-wide instance is built from them here).

Invariants:
- Every write bumps its scope's corpus version once, after the store accepted it, so every
  process's cache reloads; call writes outside an open transaction (from `on_commit` or a
  job), since a bump rolled back with the caller's transaction would leave other
  processes' caches stale until the next write.
- Replacing writes (sync_lore, update_turn_narrative(s)) write the new chunks before
  deleting the old, so a concurrent search never sees the scope without them.
- Embeddings come from the packaged MiniLM (embedding.py), loaded on first need; Chroma's
  own embedding function is never attached.

Failure modes: without an embedding runtime nothing is embedded ("" ids, 0 counts, no
change) and a query runs on the lexical arms; reads, rollback and copies still work. A
store that cannot be reached raises VectorStoreError or the chromadb / httpx error
(`is_store_failure` tells them apart from bugs) from writes, so jobs retry; a query with the
scope's corpus cached degrades to the lexical arms instead (QueryStats.vector_store_error).

Processes: the embedded `PersistentClient` is for one process only and guarded by an
exclusive file lock (VectorStoreLockedError for a second process); any set-up with several
processes uses a Chroma server (`chroma run`) through `HttpClient` (settings.CHROMA_HOST).
`get_vector_memory()` builds the process-wide instance from settings (vector_settings.py).
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterable
from typing import Any

import numpy as np

from studio.memory.embeddings import embedding
from studio.memory.embeddings.embedding import preload_embedding_runtime
from studio.memory.retrieval import chunks
from studio.memory.retrieval.chunks import BOOKKEEPING_KEYS, CORE_KEYS, LORE
from studio.memory.retrieval.config import RetrievalConfig
from studio.memory.corpus_log import DatabaseCorpusVersions
from studio.memory.retrieval import changes as change_log
from studio.memory.retrieval.changes import LocalCorpusVersions
from studio.memory.retrieval.corpus import CorpusCache, SearchFilter
from studio.memory.retrieval.explain import QueryResult, QueryStats, why_not
from studio.memory.retrieval.hybrid import HybridSearch
from studio.memory.retrieval.temporal import TimePreference
from studio.memory.retrieval.store import (
    COLLECTION_NAME,
    LOCK_FILE_NAME,
    MAX_COLLECTION_NAME,
    STORE_CLIENT_MODULES,
    ChunkStore,
    VectorStoreError,
    VectorStoreLockedError,
    acquire_store_lock,
    is_store_failure,
    release_store_lock,
    scope_collection_name,
    where_clause,
)
from studio.memory.vector_settings import get_configured_reranker, vector_memory_options

__all__ = [
    "BOOKKEEPING_KEYS",
    "COLLECTION_NAME",
    "CORE_KEYS",
    "DatabaseCorpusVersions",
    "LOCK_FILE_NAME",
    "LORE",
    "LocalCorpusVersions",
    "MAX_COLLECTION_NAME",
    "QueryResult",
    "QueryStats",
    "RetrievalConfig",
    "STORE_CLIENT_MODULES",
    "VectorMemory",
    "VectorStoreError",
    "VectorStoreLockedError",
    "acquire_store_lock",
    "build_vector_memory",
    "get_configured_reranker",
    "get_vector_memory",
    "is_store_failure",
    "preload_embedding_runtime",
    "release_store_lock",
    "reset_vector_memory",
    "scope_collection_name",
]


class VectorMemory:
    """Local semantic memory store backed by ChromaDB, with hybrid search.

    `persist_dir`: directory of the embedded store (created if missing, locked for this
    process). `reranker`: an object with `rerank(query_text, documents)` (e.g.
    CrossEncoderReranker), or None for no reranking. Keyword-only extras: `client`, a
    chromadb client to use instead of opening `persist_dir` (an HttpClient for a Chroma
    server; no lock is taken then); `embedder`, an embedding model object (default: the
    packaged MiniLM, loaded lazily); `versions`, the corpus-version store (default: the
    database); `config`, the RetrievalConfig; `rerank_pool`, the reranker's candidate cap;
    `collection_name`, the prefix of the scopes' collection names. `store` is the
    ChunkStore (the scopes' collections, for tools that reach Chroma directly).
    """

    def __init__(
        self,
        persist_dir: str | None,
        reranker: Any | None = None,
        *,
        client: Any | None = None,
        embedder: Any | None = None,
        versions: Any | None = None,
        config: RetrievalConfig | None = None,
        rerank_pool: int | None = None,
        collection_name: str = COLLECTION_NAME,
    ) -> None:
        self.persist_dir = str(persist_dir) if persist_dir is not None else None
        self.reranker = reranker
        self.config = config or RetrievalConfig()
        if rerank_pool is not None:
            self.config = RetrievalConfig(**{**self.config.__dict__, "rerank_pool": int(rerank_pool)})
        self.collection_name = collection_name
        self._versions = versions or DatabaseCorpusVersions()
        self._embedder = embedder
        on_change = self.note_external_write  # the legacy move wrote into a scope
        if client is None:
            if self.persist_dir is None:
                raise ValueError("VectorMemory needs persist_dir or client")
            self.store = ChunkStore.open_embedded(
                self.persist_dir, collection_name=collection_name, on_change=on_change
            )
        else:
            self.store = ChunkStore(client, collection_name=collection_name, on_change=on_change)
        self._corpora = CorpusCache(self.store, self._versions)
        self._search = HybridSearch(self.store, self._corpora)

    # -- lifecycle and plumbing --

    def close(self) -> None:
        """Release the embedded store's process lock (the client itself is process-cached)."""
        self.store.close()

    @property
    def _client(self) -> Any:
        """The chromadb client (tests and benchmarks reach Chroma through it)."""
        return self.store.client

    @property
    def store_description(self) -> str:
        return self.store.description

    def collection_name_for(self, scope_id: str) -> str:
        """Return the name of the scope's Chroma collection (see `scope_collection_name`)."""
        return self.store.collection_name_for(scope_id)

    def collection_for(self, scope_id: str, *, create: bool = True):
        """Return the scope's Chroma collection (None when missing and `create` is False).

        For tools that write precomputed vectors directly (benchmarks): such a writer must
        store the same metadata as `embed_chunks` and then bump the scope's corpus version
        (`DatabaseCorpusVersions().bump(scope_id)` or `note_external_write`) so caches reload.
        """
        return self.store.collection(str(scope_id), create=create)

    def note_external_write(self, scope_id: str, *, added=(), removed=()) -> None:
        """Tell the caches that the scope's collection was written outside this class.

        Without `added` / `removed` (the chunk ids written and deleted) every process's cache
        lists the scope's ids on its next read; with them, it fetches only those chunks.
        """
        self._bump(str(scope_id), added=added, removed=removed)

    def _bump(self, scope_id: str, *, added=(), removed=()) -> None:
        # The change log (retrieval/changes.py): what moved, so caches fetch only that.
        change_log.bump(self._versions, scope_id, added=added, removed=removed)

    def _get_embedder(self):
        if self._embedder is None:
            self._embedder = embedding.get_embedder()
        return self._embedder

    def text_embedder(self):
        """Return the embedding model this memory encodes with (None: unavailable), for callers that compare
        texts by meaning outside the store (the continuity guard)."""
        return self._get_embedder()

    @property
    def embeddings_available(self) -> bool:
        """Return True when chunks can be embedded (the model loads)."""
        return self._get_embedder() is not None

    @property
    def last_query_stats(self) -> QueryStats | None:
        """Stats of the last search made by the calling thread."""
        return self._search.last_stats

    def _delete_ids(self, scope_id: str, ids: list[str]) -> None:
        # One seam for every delete of the writes below (tests inject a failing delete here).
        self.store.delete_ids(scope_id, ids)

    def _ids_where(self, scope_id: str, where: dict[str, Any] | None) -> list[str]:
        return self.store.get_paged(str(scope_id), where, include=[])["ids"]

    def _ids_after(self, scope_id: str, target_turn_id: int) -> list[str]:
        """The ids of the scope's chunks after `target_turn_id`. From this process's corpus of the scope when it
        keeps one, with the change log since it (every write of every process logs its ids): the ids in hand,
        where a `turn_id > N` filter is a scan of the store's metadata (18 ms of a rewind by one at 100,000 chunks
        on embedded Chroma). Else listed by the store."""
        ids = self._corpora.ids_after(scope_id, target_turn_id)
        if ids is None:
            return self._ids_where(scope_id, {"turn_id": {"$gt": target_turn_id}})
        return ids

    # -- writes --

    def embed_chunks(self, save_id: str, items: Iterable[dict[str, Any]], *, batch_size: int = 32) -> list[str]:
        """Embed many chunks in batches; return the (first) chunk id of each item.

        Each item is a dict with turn_id, text and optionally chunk_type (default
        "narrative") and metadata_extra, as for `embed_chunk`. Texts are encoded
        `batch_size` at a time and written in Chroma-sized batches, and the scope's corpus
        version moves once. An item with blank text gets "" and stores nothing; with the
        embedding runtime unavailable nothing is stored and every id is "".
        """
        items = list(items)
        embedder = self._get_embedder()
        if embedder is None or not items:
            return ["" for _ in items]
        ids, documents, metadatas, first_ids = chunks.prepare_chunks(save_id, items, embedder)
        if not ids:
            return first_ids
        vectors = embedder.encode(documents, batch_size=batch_size)
        self.store.upsert(str(save_id), ids, vectors, documents, metadatas)
        self._bump(str(save_id), added=ids)
        return first_ids

    def embed_chunk(
        self,
        save_id: str,
        turn_id: int,
        text: str,
        chunk_type: str = "narrative",
        metadata_extra: dict[str, Any] | None = None,
    ) -> str:
        """Embed a text chunk and store it with turn_id metadata; return its chunk id.

        `metadata_extra` is merged into the chunk's metadata (e.g. a lore entry's
        entry_id); the core keys save_id, turn_id and chunk_type always take precedence.
        Text longer than the model's window is stored as several overlapping chunks of the
        same turn; the id of the first is returned. Return "" when nothing was stored
        (blank text, or the embedding runtime is unavailable).
        """
        return self.embed_chunks(
            save_id,
            [{"turn_id": turn_id, "text": text, "chunk_type": chunk_type, "metadata_extra": metadata_extra}],
        )[0]

    def sync_lore(self, save_id: str, entries: list[dict[str, Any]]) -> int:
        """Re-embed this save's Lore Book entries (idempotent); return how many were embedded.

        Each entry is a dict with entry_id and text, optionally title and links (entry ids
        it links to, used by link expansion). Entries are embedded as chunk_type "lore",
        turn_id 0 (timeless, so they survive any rewind), with entry_id in the metadata.
        The new chunks are written before the old lore chunks are deleted, so a concurrent
        search never sees an empty Lore Book. Return 0 (and change nothing) when the
        embedding runtime is unavailable.
        """
        if self._get_embedder() is None:
            return 0
        items = chunks.lore_items(entries)
        old = self._ids_where(save_id, {"chunk_type": LORE})
        new_ids = self.embed_chunks(save_id, items) if items else []
        if old:
            self._delete_ids(str(save_id), old)
            self._bump(str(save_id), removed=old)
        return sum(1 for chunk_id in new_ids if chunk_id)

    def rollback(self, save_id: str, target_turn_id: int) -> int:
        """Delete all chunks of a save with turn_id strictly greater than `target_turn_id`.

        Return the number of chunks deleted. Lore (turn 0) survives any rewind to a turn
        >= 0. Works without the embedding runtime.
        """
        ids = self._ids_after(str(save_id), int(target_turn_id))
        if ids:
            self._delete_ids(str(save_id), ids)
            self._bump(str(save_id), removed=ids)
        return len(ids)

    def update_turn_narrative(self, save_id: str, turn_id: int, new_text: str, chunk_type: str = "narrative") -> None:
        """Replace the turn's chunks of `chunk_type` with the embedded `new_text`.

        The new chunks are written first, then the old ones deleted. Nothing changes when
        the embedding runtime is unavailable.
        """
        if self._get_embedder() is None:
            return
        old = self._ids_where(save_id, where_clause([{"turn_id": int(turn_id)}, {"chunk_type": str(chunk_type)}]))
        self.embed_chunk(save_id, turn_id, new_text, chunk_type=chunk_type)
        if old:
            self._delete_ids(str(save_id), old)
            self._bump(str(save_id), removed=old)

    def update_turn_narratives(self, save_id: str, texts: dict[int, str], chunk_type: str = "narrative") -> None:
        """`update_turn_narrative` for several turns at once ({turn_id: new text}).

        One encode call and one write for all the turns, then the turns' old chunks of
        `chunk_type` are deleted (a re-run replaces, never duplicates). Nothing changes when
        the embedding runtime is unavailable.
        """
        if self._get_embedder() is None or not texts:
            return
        by_turn = {int(turn): text for turn, text in texts.items()}
        turns = sorted(by_turn)
        old = self._ids_where(save_id, where_clause([{"turn_id": {"$in": turns}}, {"chunk_type": str(chunk_type)}]))
        self.embed_chunks(
            save_id, [{"turn_id": turn, "text": by_turn[turn], "chunk_type": chunk_type} for turn in turns]
        )
        if old:
            self._delete_ids(str(save_id), old)
            self._bump(str(save_id), removed=old)

    def copy_save(self, source_save_id: str, target_save_id: str, *, max_turn_id: int) -> int:
        """Copy a save's chunks with turn_id <= max_turn_id to another save (a fork).

        The stored embeddings are copied, nothing is re-embedded; lore (turn 0) comes
        along. Idempotent: the target's chunks up to `max_turn_id` are replaced, its later
        chunks untouched. Return the number of chunks copied.
        """
        source_id, target_id = str(source_save_id), str(target_save_id)
        horizon = {"turn_id": {"$lte": int(max_turn_id)}}
        source = self.store.get_paged(source_id, horizon, include=["documents", "metadatas", "embeddings"])
        stale = self._ids_where(target_id, horizon)
        if stale:
            self._delete_ids(target_id, stale)
        ids = []
        if source["ids"]:
            metadatas = [{**metadata, "save_id": target_id} for metadata in source["metadatas"]]
            ids = [uuid.uuid4().hex for _ in source["ids"]]
            vectors = np.asarray(source["embeddings"], dtype=np.float32)
            self.store.upsert(target_id, ids, vectors, source["documents"], metadatas)
        if stale or source["ids"]:
            self._bump(target_id, added=ids, removed=stale)
        return len(source["ids"])

    def delete_save(self, save_id: str) -> int:
        """Delete every chunk of a save (lore included) by dropping its collection; return how many."""
        deleted = self.store.drop(str(save_id))
        if deleted is None:  # no collection: nothing changed
            return 0
        self._bump(str(save_id))  # no change named: every cache lists the (now empty) scope
        return deleted

    # -- reads --

    def count(self, save_id: str) -> int:
        """Return the number of chunks stored for a save (lore included)."""
        return self.store.count(str(save_id))

    def get_chunks(
        self,
        save_id: str,
        *,
        chunk_type: str | None = None,
        max_turn_id: int | None = None,
        turn_ids: Iterable[int] | None = None,
    ) -> list[dict[str, Any]]:
        """Return a save's chunks (id, text, turn_id, chunk_type, entry_id, metadata), by turn.

        `turn_ids` keeps only the chunks of those turns (the timeline's page of turns).
        """
        conditions: list[dict[str, Any]] = []
        if chunk_type is not None:
            conditions.append({"chunk_type": chunk_type})
        if max_turn_id is not None:
            conditions.append({"turn_id": {"$lte": int(max_turn_id)}})
        if turn_ids is not None:
            wanted = sorted({int(turn_id) for turn_id in turn_ids})
            if not wanted:
                return []
            conditions.append({"turn_id": {"$in": wanted}})
        page = self.store.get_paged(str(save_id), where_clause(conditions), include=["documents", "metadatas"])
        rows = [chunks.result_row(i, d, m) for i, d, m in zip(page["ids"], page["documents"], page["metadatas"])]
        rows.sort(key=lambda row: (row["turn_id"], row["chunk_type"], row["metadata"].get("chunk_seq", 0)))
        return rows

    def set_config(self, config: RetrievalConfig) -> None:
        """Switch the search pipeline's knobs (drops the cached indexes)."""
        self.config = config
        self._corpora.clear()

    # -- search --

    def _knobs(self) -> dict[str, Any]:
        """The settings a search reads, current at call time."""
        return {"config": self.config, "reranker": self.reranker, "embedder": self._get_embedder}

    def query(
        self,
        save_id: str,
        query_text: str,
        k: int = 5,
        current_turn_id: int | None = None,
        max_turn_id: int | None = None,
        focus_terms: list[str] | None = None,
        chunk_type: str | None = None,
        exclude_chunk_type: str | None = None,
    ) -> list[dict[str, Any]]:
        """Return the top-k chunks for `query_text` by hybrid search.

        Filters: the save; the turn horizon min(current_turn_id, max_turn_id) when given;
        `chunk_type` (only this type, e.g. "lore") and `exclude_chunk_type` (e.g. the
        narrative query passes "lore" so lore never eats its k budget). `focus_terms`
        (current location, characters on scene) give chunks mentioning any of them a small
        additive boost. Each result: id, text, turn_id, chunk_type, entry_id (the chunk's
        source id, else None), every stored metadata key, metadata, score, distance, and an
        `explain` record. Stage timings: `last_query_stats` (or use `query_explained`).
        """
        return self.query_explained(
            save_id,
            query_text,
            k=k,
            current_turn_id=current_turn_id,
            max_turn_id=max_turn_id,
            focus_terms=focus_terms,
            chunk_type=chunk_type,
            exclude_chunk_type=exclude_chunk_type,
        ).results

    def query_explained(
        self,
        save_id: str,
        query_text: str,
        k: int = 5,
        current_turn_id: int | None = None,
        max_turn_id: int | None = None,
        focus_terms: list[str] | None = None,
        chunk_type: str | None = None,
        exclude_chunk_type: str | None = None,
        *,
        expand_links: bool = False,
        use_reranker: bool = True,
        prefer: TimePreference | None = None,
    ) -> QueryResult:
        """Run `query` and return its results together with the stage timings.

        `expand_links`: for each lore hit, also return the lore entries it links to (one
        hop, at most config.link_expansion_cap in all), after the top k, each marked with
        explain["expanded_from"] = the linking entry's entry_id. `use_reranker=False` skips
        the reranker for this query. `prefer`: the turns inside the time the query names
        (`studio.memory.recall.temporal`), searched by the temporal arm; None: no such arm.
        """
        return self._search.query(
            save_id,
            query_text,
            k=k,
            filters=SearchFilter.for_query(current_turn_id, max_turn_id, chunk_type, exclude_chunk_type),
            focus_terms=focus_terms,
            expand_links=expand_links,
            use_reranker=use_reranker,
            prefer=prefer,
            **self._knobs(),
        )

    def explain_chunk(
        self,
        save_id: str,
        query_text: str,
        chunk_id: str,
        k: int = 5,
        current_turn_id: int | None = None,
        max_turn_id: int | None = None,
        focus_terms: list[str] | None = None,
        chunk_type: str | None = None,
        exclude_chunk_type: str | None = None,
        *,
        prefer: TimePreference | None = None,
    ) -> dict[str, Any]:
        """Explain where one chunk ranked for a query ("why not this chunk?").

        Return {"chunk": row or None, "filtered_out": reason or None, "ranks": {arm: rank
        over the whole filtered corpus}, "scores": {arm: score}, "fused_rank", "fused_score"
        (the RRF score; both None when no arm reaches the chunk within its depth),
        "final_rank" (None when not in the top k), "k", "arm_depth", "filtered_size"}.
        Ranks here are exact over the filtered corpus, not cut at the arm depth a search
        uses (`arm_depth` says where an arm stops contributing).
        """
        return why_not(
            self._search,
            save_id,
            query_text,
            chunk_id,
            k=k,
            filters=SearchFilter.for_query(current_turn_id, max_turn_id, chunk_type, exclude_chunk_type),
            focus_terms=focus_terms,
            prefer=prefer,
            **self._knobs(),
        )


# --- Process-wide instance -----------------------------------------------------------------

_instance: VectorMemory | None = None
_instance_pid: int | None = None
_instance_lock = threading.Lock()


def build_vector_memory() -> VectorMemory:
    """Build a VectorMemory from settings (read now, not at import; see `vector_memory_options`)."""
    return VectorMemory(**vector_memory_options())


def get_vector_memory() -> VectorMemory:
    """Return this process's VectorMemory, building it from settings on first use."""
    global _instance, _instance_pid
    with _instance_lock:
        if _instance is not None and _instance_pid == os.getpid():
            return _instance
        # None yet, or inherited through fork (it belongs to the parent process).
        _instance = build_vector_memory()
        _instance_pid = os.getpid()
        return _instance


def reset_vector_memory() -> None:
    """Forget the process-wide VectorMemory and release its store lock (for tests)."""
    global _instance, _instance_pid
    with _instance_lock:
        if _instance is not None and _instance_pid == os.getpid():
            _instance.close()
        _instance = None
        _instance_pid = None
