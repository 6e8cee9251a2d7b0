"""Vector memory for narrative chunks: ChromaDB storage and hybrid search.

Every chunk carries a turn_id, which makes rewinding surgical: rolling a save back to turn
N deletes every chunk with turn_id > N, so nothing from the abandoned timeline bleeds into
the rebuilt one.

Collection layout (one Chroma collection per scope -- a save id, or a universe lore scope such
as "universe-12" -- see docs/retrieval.md for the measured decision): name
`scope_collection_name(scope)` ("narrative_memory-<scope>", or a hashed form for ids with other
characters), collection metadata {"scope_id": scope}; document = the chunk text; metadata = save_id (str),
turn_id (int), chunk_type (str), entry_id (when the chunk has a source row, e.g. a lore
entry), whatever `metadata_extra` carried, and the bookkeeping keys chunk_seq (write order,
for neighbouring context), chunk_part / chunk_parts (position of a long text's piece);
id = a UUID per chunk. Embeddings come from the packaged MiniLM (embedding.py); Chroma's
own embedding function is never attached. A search queries its scope's collection without a
`where` clause whenever the cached corpus shows the filters exclude few chunks (Chroma's cost
is the `where` evaluation, not HNSW). Chunks still in the old shared "narrative_memory"
collection are moved to their scope's collection on first access (ids and embeddings kept).

Search (`query`) fuses several arms with Reciprocal Rank Fusion: the semantic arm (a
Chroma query), the BM25 arm over each chunk's own text, a BM25 arm over each chunk read
with its neighbours in the same turn, and a turn arm (chunks of the turns whose whole text
matches best). Then a focus boost, an optional cross-encoder over a capped pool, and lore
link expansion. docs/retrieval.md explains each step and what it bought.

Processes: the embedded `PersistentClient` is for one process only and is guarded by an
exclusive file lock; any set-up with several processes uses a Chroma server (`chroma run`)
through `HttpClient` (settings.CHROMA_HOST). `get_vector_memory()` builds the process-wide
instance from settings.
"""
from __future__ import annotations

import errno
import fcntl
import hashlib
import logging
import os
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from studio.memory import chunking, embedding
from studio.memory.embedding import preload_embedding_runtime  # noqa: F401  (engine API)
from studio.memory.retrieval import fusion, lexical

logger = logging.getLogger(__name__)

COLLECTION_NAME = "narrative_memory"  # prefix of every scope's collection; also the legacy shared collection
LOCK_FILE_NAME = ".axiom-vector-store.lock"
CORE_KEYS = ("save_id", "turn_id", "chunk_type")
BOOKKEEPING_KEYS = ("chunk_seq", "chunk_part", "chunk_parts")
LORE = "lore"
MAX_COLLECTION_NAME = 512  # Chroma: 3-512 chars of [a-zA-Z0-9._-], alphanumeric at both ends, no ".."
_CLEAN_SCOPE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?\Z")
# Chroma fails a get() that returns more than 32,766 rows with documents (SQLite variable
# limit); every bulk read goes page by page.
GET_PAGE_SIZE = 5000


class VectorStoreError(RuntimeError):
    """The vector store (Chroma) cannot be reached or used."""


class VectorStoreLockedError(VectorStoreError):
    """Another process already has the embedded Chroma store open."""


# --- Arms, fusion and the explain record -----------------------------------------------


@dataclass(frozen=True)
class RetrievalConfig:
    """The search pipeline's knobs; the defaults are the measured ones (docs/retrieval.md)."""

    arms: tuple[str, ...] = ("semantic", "lexical", "context", "turn")
    stop_words: bool = True
    fold_inflections: bool = True
    rrf_k: int = fusion.DEFAULT_RRF_K
    arm_depth: int = 50  # each arm contributes its best `arm_depth` ids (cap_per_source)
    semantic_weight: float = 1.0
    lexical_weight: float = 1.0
    context_weight: float = 1.0
    turn_weight: float = 1.0
    context_window: int = 2  # neighbours read on each side, within the same turn
    bm25_k1: float = 1.5
    bm25_b: float = 0.5
    focus_boost: float = 0.005  # about what moving up several places in one arm is worth
    rerank_pool: int = 50
    link_expansion_cap: int = 3
    max_cached_scopes: int = 16
    max_views_per_scope: int = 8


@dataclass
class QueryStats:
    """What one search did and how long each stage took (milliseconds)."""

    timings_ms: dict[str, float] = field(default_factory=dict)
    corpus_size: int = 0
    filtered_size: int = 0
    arm_sizes: dict[str, int] = field(default_factory=dict)
    corpus_rebuilt: bool = False
    reranked: bool = False
    semantic_available: bool = True
    lexical_available: bool = True
    # Set when the vector store failed during this query and the answer fell back to the
    # lexical arms over the last cached corpus.
    vector_store_error: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "timings_ms": dict(self.timings_ms),
            "corpus_size": self.corpus_size,
            "filtered_size": self.filtered_size,
            "arm_sizes": dict(self.arm_sizes),
            "corpus_rebuilt": self.corpus_rebuilt,
            "reranked": self.reranked,
            "semantic_available": self.semantic_available,
            "lexical_available": self.lexical_available,
            "vector_store_error": self.vector_store_error,
        }


@dataclass
class QueryResult:
    results: list[dict[str, Any]]
    stats: QueryStats


class _Timer:
    def __init__(self, stats: QueryStats):
        self.stats = stats
        self.start = time.perf_counter()
        self.last = self.start

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.stats.timings_ms[name] = round(self.stats.timings_ms.get(name, 0.0) + (now - self.last) * 1000, 3)
        self.last = now

    def total(self) -> None:
        self.stats.timings_ms["total"] = round((time.perf_counter() - self.start) * 1000, 3)


# --- Per-scope corpus version (cache invalidation across processes) ----------------------


class DatabaseCorpusVersions:
    """Per-scope change counters in the database (VectorCorpusVersion rows).

    Every write bumps its scope's counter; every search reads it (one indexed SELECT) and
    rebuilds its cached corpus only when the number moved, whichever process wrote.
    """

    def current(self, scope_id: str) -> int:
        from studio.memory.models import VectorCorpusVersion

        version = VectorCorpusVersion.objects.filter(scope_id=scope_id).values_list("version", flat=True).first()
        return int(version or 0)

    def bump(self, scope_id: str) -> int:
        from django.db import IntegrityError, transaction
        from django.db.models import F

        from studio.memory.models import VectorCorpusVersion

        for _attempt in range(3):
            try:
                with transaction.atomic():
                    updated = VectorCorpusVersion.objects.filter(scope_id=scope_id).update(
                        version=F("version") + 1
                    )
                    if not updated:
                        VectorCorpusVersion.objects.create(scope_id=scope_id, version=1)
                    return self.current(scope_id)
            except IntegrityError:  # two processes created the row at once: update again
                continue
        raise VectorStoreError(f"could not bump the corpus version of {scope_id!r}")


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


# --- The embedded store's process lock ---------------------------------------------------

_store_locks: dict[str, dict[str, int]] = {}
_store_locks_guard = threading.Lock()


def _lock_message(path: str, holder: str) -> str:
    return (
        f"The embedded Chroma store at {path} is already open in another process{holder}. "
        "Two processes writing one embedded store silently corrupt its vector index, so only "
        "one may open it. Run a Chroma server instead, e.g. "
        f"`chroma run --path {path} --host 127.0.0.1 --port 8000`, and set CHROMA_HOST=127.0.0.1 "
        "(and CHROMA_PORT=8000) in the environment of every process (web, workers, commands)."
    )


def acquire_store_lock(path: str) -> None:
    """Take the exclusive, non-blocking lock on the embedded store at `path` for this process.

    Raise VectorStoreLockedError at once when another process holds it (including a forked
    child of the holder). Re-entrant within one process.
    """
    real = os.path.realpath(path)
    with _store_locks_guard:
        held = _store_locks.get(real)
        if held is not None and held["pid"] == os.getpid():
            held["refs"] += 1
            return
        if held is not None:  # inherited across fork: the lock belongs to the parent
            raise VectorStoreLockedError(_lock_message(real, f" (pid {held['pid']}, this process's parent)"))
        os.makedirs(real, exist_ok=True)
        lock_path = os.path.join(real, LOCK_FILE_NAME)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = ""
            try:
                holder_pid = os.pread(fd, 32, 0).decode().strip()
                holder = f" (pid {holder_pid})" if holder_pid else ""
            except OSError:
                pass
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise VectorStoreLockedError(_lock_message(real, holder)) from None
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        _store_locks[real] = {"fd": fd, "pid": os.getpid(), "refs": 1}


def release_store_lock(path: str) -> None:
    """Release one hold on the store lock taken by this process (the last one unlocks)."""
    real = os.path.realpath(path)
    with _store_locks_guard:
        held = _store_locks.get(real)
        if held is None or held["pid"] != os.getpid():
            return
        held["refs"] -= 1
        if held["refs"] <= 0:
            try:
                fcntl.flock(held["fd"], fcntl.LOCK_UN)
            finally:
                os.close(held["fd"])
                del _store_locks[real]


# --- Cached corpus of one scope ----------------------------------------------------------


@dataclass
class _View:
    """The chunks passing one filter, with their BM25 indexes."""

    positions: np.ndarray  # corpus positions, in corpus order
    own_index: Any
    context_index: Any
    turn_index: Any
    turn_of_position: np.ndarray  # per view position: its group (turn) document
    member: np.ndarray = None  # per corpus position: passes the filter


@dataclass
class _Corpus:
    version: int
    ids: list[str]
    texts: list[str]
    metadatas: list[dict[str, Any]]
    turn_ids: np.ndarray
    chunk_types: np.ndarray
    position: dict[str, int]
    terms: list[list[str]]
    views: OrderedDict = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _sanitize_metadata(values: dict[str, Any]) -> dict[str, Any]:
    """Return metadata Chroma accepts: scalars as they are, lists of scalars, no None."""
    clean: dict[str, Any] = {}
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, (str, int, float, bool)):
            clean[str(key)] = value
        elif isinstance(value, (list, tuple)):
            items = [item for item in value if isinstance(item, (str, int, float, bool))]
            if items:
                clean[str(key)] = [str(item) for item in items] if any(isinstance(i, str) for i in items) else items
        else:
            clean[str(key)] = str(value)
    return clean


def scope_collection_name(scope_id: str, prefix: str = COLLECTION_NAME) -> str:
    """Return the Chroma collection name of a scope (deterministic, valid, injective).

    A scope id made of [a-zA-Z0-9._-], alphanumeric at both ends, without "..", and short
    enough gives "<prefix>-<scope id>"; any other id gives "<prefix>--<readable part>-<16
    hex of its SHA-256>" (the double dash cannot come from the first form, whose scope part
    starts with an alphanumeric). The scope id itself is kept in the collection metadata.
    """
    scope = str(scope_id)
    if _CLEAN_SCOPE.match(scope) and ".." not in scope and len(prefix) + 1 + len(scope) <= MAX_COLLECTION_NAME:
        return f"{prefix}-{scope}"
    readable = re.sub(r"[^A-Za-z0-9]+", "-", scope)[:40].strip("-")
    digest = hashlib.sha256(scope.encode("utf-8")).hexdigest()[:16]
    return f"{prefix}--{readable}-{digest}" if readable else f"{prefix}--{digest}"


def _is_not_found(exc: Exception) -> bool:
    try:
        from chromadb.errors import NotFoundError
    except Exception:  # pragma: no cover
        return False
    return isinstance(exc, NotFoundError)


# A Chroma server that is down or restarting surfaces as an error of its HTTP client (or of
# chromadb itself) from whichever collection call was running.
STORE_CLIENT_MODULES = ("chromadb", "httpx", "httpcore")


def is_store_failure(exc: BaseException) -> bool:
    """True for an error that means the vector store cannot be reached or used right now."""
    if isinstance(exc, VectorStoreError):
        return True
    return (type(exc).__module__ or "").split(".")[0] in STORE_CLIENT_MODULES


def _where(conditions: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not conditions:
        return None
    if len(conditions) == 1:
        return conditions[0]
    return {"$and": conditions}


def _horizon(current_turn_id: int | None, max_turn_id: int | None) -> int | None:
    bounds = [int(bound) for bound in (current_turn_id, max_turn_id) if bound is not None]
    return min(bounds) if bounds else None


def _mentions(text_tokens: str, focus: list[str]) -> bool:
    return any(term and term in text_tokens for term in focus)


# --- VectorMemory --------------------------------------------------------------------------


class VectorMemory:
    """Local semantic memory store backed by ChromaDB, with hybrid search.

    `persist_dir`: directory of the embedded store (created if missing, locked for this
    process). `reranker`: an object with `rerank(query_text, documents)` (e.g.
    CrossEncoderReranker), or None for no reranking. Keyword-only extras: `client`, a
    chromadb client to use instead of opening `persist_dir` (an HttpClient for a Chroma
    server; no lock is taken then); `embedder`, an embedding model object (default: the
    packaged MiniLM, loaded lazily); `versions`, the corpus-version store (default: the
    database); `config`, the RetrievalConfig; `rerank_pool`, the reranker's candidate cap.
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
        self._owns_lock = False
        self._corpora: OrderedDict[str, _Corpus] = OrderedDict()
        self._corpora_lock = threading.Lock()
        self._local = threading.local()
        self._disabled_reason: str | None = None
        self._collections: dict[str, Any] = {}  # scope id -> its Chroma collection
        self._collections_lock = threading.Lock()
        self._legacy: Any = None  # the old shared collection: None = not looked up yet, False = absent
        self._legacy_checked: set[str] = set()
        self._legacy_lock = threading.Lock()
        if client is None:
            if self.persist_dir is None:
                raise ValueError("VectorMemory needs persist_dir or client")
            acquire_store_lock(self.persist_dir)
            self._owns_lock = True
            try:
                import chromadb
                from chromadb.config import Settings

                client = chromadb.PersistentClient(
                    path=self.persist_dir, settings=Settings(anonymized_telemetry=False)
                )
            except Exception:
                self.close()
                raise
        self._client = client

    # -- lifecycle and plumbing --

    def close(self) -> None:
        """Release the embedded store's process lock (the client itself is process-cached)."""
        if self._owns_lock and self.persist_dir is not None:
            release_store_lock(self.persist_dir)
            self._owns_lock = False

    @property
    def store_description(self) -> str:
        if self._owns_lock:
            return f"embedded store at {self.persist_dir}"
        return f"Chroma client {type(self._client).__name__}"

    def collection_name_for(self, scope_id: str) -> str:
        """Return the name of the scope's Chroma collection (see `scope_collection_name`)."""
        return scope_collection_name(str(scope_id), self.collection_name)

    def collection_for(self, scope_id: str, *, create: bool = True):
        """Return the scope's Chroma collection (None when missing and `create` is False).

        For tools that write precomputed vectors directly (benchmarks): such a writer must
        store the same metadata as `embed_chunks` and then bump the scope's corpus version
        (`DatabaseCorpusVersions().bump(scope_id)` or `note_external_write`) so caches reload.
        """
        return self._scope_collection(str(scope_id), create=create)

    def note_external_write(self, scope_id: str) -> None:
        """Tell the caches that the scope's collection was written outside this class."""
        self._bump(str(scope_id))

    def _forget_collection(self, scope_id: str) -> None:
        with self._collections_lock:
            self._collections.pop(str(scope_id), None)

    def _scope_collection(self, scope_id: str, *, create: bool):
        scope = str(scope_id)
        with self._collections_lock:
            cached = self._collections.get(scope)
        if cached is not None:
            return cached
        self._migrate_legacy(scope)
        name = self.collection_name_for(scope)
        try:
            if create:
                collection = self._client.get_or_create_collection(
                    name,
                    embedding_function=None,
                    configuration={"hnsw": {"space": "cosine"}},
                    metadata={"scope_id": scope},
                )
            else:
                try:
                    collection = self._client.get_collection(name, embedding_function=None)
                except Exception as exc:
                    if not _is_not_found(exc):
                        raise
                    return None
        except Exception as exc:
            raise VectorStoreError(f"Chroma unavailable ({self.store_description}): {exc}") from exc
        owner = (collection.metadata or {}).get("scope_id")
        if owner is not None and str(owner) != scope:
            raise VectorStoreError(f"collection {name!r} belongs to scope {owner!r}, not {scope!r}")
        with self._collections_lock:
            self._collections[scope] = collection
        return collection

    def _call(self, scope_id: str, action, *, create: bool, default: Any = None):
        """Run action(collection) on the scope's collection; retry once if it was dropped meanwhile.

        Return `default` when the collection does not exist and `create` is False.
        """
        for attempt in (0, 1):
            collection = self._scope_collection(scope_id, create=create)
            if collection is None:
                return default
            try:
                return action(collection)
            except Exception as exc:
                if not _is_not_found(exc):
                    raise
                # Dropped (delete_save) by this or another process since we cached it.
                self._forget_collection(scope_id)
                if attempt:
                    raise VectorStoreError(f"collection of {scope_id!r} vanished: {exc}") from exc
        return default

    def _legacy_collection(self):
        """Return the old shared collection when it exists (looked up once per instance)."""
        if self._legacy is None:
            try:
                self._legacy = self._client.get_collection(self.collection_name, embedding_function=None)
            except Exception as exc:
                if not _is_not_found(exc):
                    raise VectorStoreError(f"Chroma unavailable ({self.store_description}): {exc}") from exc
                self._legacy = False
        return self._legacy or None

    def _migrate_legacy(self, scope: str) -> None:
        """Move the scope's chunks from the old shared collection into its own (once per process).

        Upserts keep each chunk's id, embedding, text and metadata, so two processes
        migrating at once write the same rows; the moved chunks are then deleted from the
        shared collection, which is dropped once empty.
        """
        with self._legacy_lock:
            if self._legacy is False or scope in self._legacy_checked:
                return
            self._legacy_checked.add(scope)
        try:
            legacy = self._legacy_collection()
            if legacy is None:
                return
            rows: dict[str, list] = {"ids": [], "documents": [], "metadatas": [], "embeddings": []}
            while True:  # page from offset 0: each page is deleted once copied
                page = legacy.get(
                    where={"save_id": scope},
                    include=["documents", "metadatas", "embeddings"],
                    limit=GET_PAGE_SIZE,
                )
                if not page["ids"]:
                    break
                if set(page["ids"]) & set(rows["ids"]):  # a delete did not take: never loop forever
                    raise VectorStoreError(f"could not move the chunks of {scope!r} out of {self.collection_name!r}")
                target = self._scope_collection(scope, create=True)
                target.upsert(
                    ids=page["ids"],
                    embeddings=np.asarray(page["embeddings"], dtype=np.float32),
                    documents=page["documents"],
                    metadatas=page["metadatas"],
                )
                legacy.delete(ids=page["ids"])
                rows["ids"].extend(page["ids"])
            if rows["ids"]:
                logger.info("moved %d chunks of %r out of the shared collection", len(rows["ids"]), scope)
                self._bump(scope)
            if legacy.count() == 0:
                try:
                    self._client.delete_collection(self.collection_name)
                except Exception as exc:
                    if not _is_not_found(exc):
                        raise
                self._legacy = False
        except Exception:
            with self._legacy_lock:
                self._legacy_checked.discard(scope)
            raise

    def _get_embedder(self):
        if self._embedder is None:
            self._embedder = embedding.get_embedder()
            if self._embedder is None:
                self._disabled_reason = embedding.embedding_unavailable_reason() or "embedding runtime unavailable"
        return self._embedder

    @property
    def embeddings_available(self) -> bool:
        """Return True when chunks can be embedded (the model loads)."""
        return self._get_embedder() is not None

    @property
    def disabled_reason(self) -> str | None:
        """Why embedding is disabled, or None."""
        self._get_embedder()
        return self._disabled_reason

    @property
    def last_query_stats(self) -> QueryStats | None:
        """Stats of the last search made by the calling thread."""
        return getattr(self._local, "stats", None)

    def _bump(self, scope_id: str) -> None:
        self._versions.bump(scope_id)

    def _get_paged(self, scope_id: str, where: dict[str, Any] | None, include: list[str]) -> dict[str, list]:
        out: dict[str, list] = {"ids": [], "documents": [], "metadatas": [], "embeddings": []}

        def read(collection) -> dict[str, list]:
            for values in out.values():
                values.clear()
            offset = 0
            while True:
                page = collection.get(where=where, include=include, limit=GET_PAGE_SIZE, offset=offset)
                ids = page["ids"]
                out["ids"].extend(ids)
                for key in ("documents", "metadatas"):
                    if key in include:
                        out[key].extend(page[key])
                if "embeddings" in include:
                    out["embeddings"].extend(list(page["embeddings"]))
                if len(ids) < GET_PAGE_SIZE:
                    return out
                offset += GET_PAGE_SIZE

        return self._call(scope_id, read, create=False, default=out)

    def _add(self, scope_id: str, ids: list[str], embeddings: np.ndarray, documents: list[str], metadatas: list[dict]) -> None:
        try:
            batch = int(self._client.get_max_batch_size())
        except Exception:
            batch = 1000

        def write(collection) -> None:
            for start in range(0, len(ids), batch):
                end = start + batch
                collection.upsert(
                    ids=ids[start:end],
                    embeddings=np.asarray(embeddings[start:end], dtype=np.float32),
                    documents=documents[start:end],
                    metadatas=metadatas[start:end],
                )

        self._call(scope_id, write, create=True)

    def _delete_ids(self, scope_id: str, ids: list[str]) -> None:
        def delete(collection) -> None:
            for start in range(0, len(ids), GET_PAGE_SIZE):
                collection.delete(ids=ids[start : start + GET_PAGE_SIZE])

        self._call(scope_id, delete, create=False)

    # -- writes --

    def _split(self, embedder, text: str) -> list[str]:
        window = min(chunking.DEFAULT_WINDOW, int(getattr(embedder, "max_tokens", chunking.DEFAULT_WINDOW)))
        if len(text) <= window:  # a word piece covers at least one character
            return [text]
        overlap = min(chunking.DEFAULT_OVERLAP, window // 4)
        return chunking.split_text(text, embedder.token_spans(text), window=window, overlap=overlap)

    def _prepare(self, save_id: str, items: list[dict[str, Any]], embedder) -> tuple[list, list, list, list[str]]:
        """Return ids, documents, metadatas and the first chunk id per item ("" if skipped)."""
        ids: list[str] = []
        documents: list[str] = []
        metadatas: list[dict[str, Any]] = []
        first_ids: list[str] = []
        seq = time.time_ns() // 1000
        for item in items:
            text = str(item.get("text") or "")
            if not text.strip():
                first_ids.append("")
                continue
            pieces = self._split(embedder, text)
            extra = dict(item.get("metadata_extra") or {})
            for part, piece in enumerate(pieces):
                chunk_id = uuid.uuid4().hex
                metadata = _sanitize_metadata(extra)
                metadata.update(
                    save_id=str(save_id),
                    turn_id=int(item["turn_id"]),
                    chunk_type=str(item.get("chunk_type") or "narrative"),
                    chunk_seq=seq,
                    chunk_part=part,
                    chunk_parts=len(pieces),
                )
                seq += 1
                ids.append(chunk_id)
                documents.append(piece)
                metadatas.append(metadata)
                if part == 0:
                    first_ids.append(chunk_id)
        return ids, documents, metadatas, first_ids

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
        ids, documents, metadatas, first_ids = self._prepare(save_id, items, embedder)
        if not ids:
            return first_ids
        vectors = embedder.encode(documents, batch_size=batch_size)
        self._add(str(save_id), ids, vectors, documents, metadatas)
        self._bump(str(save_id))
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
        embedder = self._get_embedder()
        if embedder is None:
            return 0
        items = []
        for entry in entries:
            text = str(entry.get("text") or "")
            if not text.strip():
                continue
            extra: dict[str, Any] = {"entry_id": str(entry["entry_id"])}
            if entry.get("title"):
                extra["title"] = str(entry["title"])
            links = [str(link) for link in entry.get("links") or [] if str(link)]
            if links:
                extra["links"] = links
            items.append({"turn_id": 0, "text": text, "chunk_type": LORE, "metadata_extra": extra})
        old = self._get_paged(str(save_id), {"chunk_type": LORE}, include=[])["ids"]
        new_ids = self.embed_chunks(save_id, items) if items else []
        if old:
            self._delete_ids(str(save_id), old)
            self._bump(str(save_id))
        return sum(1 for chunk_id in new_ids if chunk_id)

    def rollback(self, save_id: str, target_turn_id: int) -> int:
        """Delete all chunks of a save with turn_id strictly greater than `target_turn_id`.

        Return the number of chunks deleted. Lore (turn 0) survives any rewind to a turn
        >= 0. Works without the embedding runtime.
        """
        ids = self._get_paged(str(save_id), {"turn_id": {"$gt": int(target_turn_id)}}, include=[])["ids"]
        if ids:
            self._delete_ids(str(save_id), ids)
            self._bump(str(save_id))
        return len(ids)

    def update_turn_narrative(self, save_id: str, turn_id: int, new_text: str, chunk_type: str = "narrative") -> None:
        """Replace the turn's chunks of `chunk_type` with the embedded `new_text`.

        The new chunks are written first, then the old ones deleted. Nothing changes when
        the embedding runtime is unavailable.
        """
        if self._get_embedder() is None:
            return
        where = _where([{"turn_id": int(turn_id)}, {"chunk_type": str(chunk_type)}])
        old = self._get_paged(str(save_id), where, include=[])["ids"]
        self.embed_chunk(save_id, turn_id, new_text, chunk_type=chunk_type)
        if old:
            self._delete_ids(str(save_id), old)
            self._bump(str(save_id))

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
        where = _where([{"turn_id": {"$in": turns}}, {"chunk_type": str(chunk_type)}])
        old = self._get_paged(str(save_id), where, include=[])["ids"]
        self.embed_chunks(
            save_id, [{"turn_id": turn, "text": by_turn[turn], "chunk_type": chunk_type} for turn in turns]
        )
        if old:
            self._delete_ids(str(save_id), old)
            self._bump(str(save_id))

    def copy_save(self, source_save_id: str, target_save_id: str, *, max_turn_id: int) -> int:
        """Copy a save's chunks with turn_id <= max_turn_id to another save (a fork).

        The stored embeddings are copied, nothing is re-embedded; lore (turn 0) comes
        along. Idempotent: the target's chunks up to `max_turn_id` are replaced, its later
        chunks untouched. Return the number of chunks copied.
        """
        horizon = {"turn_id": {"$lte": int(max_turn_id)}}
        source = self._get_paged(str(source_save_id), horizon, include=["documents", "metadatas", "embeddings"])
        stale = self._get_paged(str(target_save_id), horizon, include=[])["ids"]
        if stale:
            self._delete_ids(str(target_save_id), stale)
        if source["ids"]:
            metadatas = [{**metadata, "save_id": str(target_save_id)} for metadata in source["metadatas"]]
            ids = [uuid.uuid4().hex for _ in source["ids"]]
            self._add(str(target_save_id), ids, np.asarray(source["embeddings"], dtype=np.float32), source["documents"], metadatas)
        if stale or source["ids"]:
            self._bump(str(target_save_id))
        return len(source["ids"])

    def delete_save(self, save_id: str) -> int:
        """Delete every chunk of a save (lore included) by dropping its collection; return how many."""
        scope = str(save_id)
        collection = self._scope_collection(scope, create=False)
        if collection is None:
            return 0
        try:
            deleted = collection.count()
            self._client.delete_collection(self.collection_name_for(scope))
        except Exception as exc:
            if not _is_not_found(exc):
                raise
            deleted = 0  # dropped meanwhile by another process
        finally:
            self._forget_collection(scope)
        self._bump(scope)
        return int(deleted)

    # -- reads --

    def count(self, save_id: str) -> int:
        """Return the number of chunks stored for a save (lore included)."""
        return int(self._call(str(save_id), lambda collection: collection.count(), create=False, default=0))

    def get_chunks(self, save_id: str, *, chunk_type: str | None = None, max_turn_id: int | None = None) -> list[dict[str, Any]]:
        """Return a save's chunks (id, text, turn_id, chunk_type, entry_id, metadata), by turn."""
        conditions: list[dict[str, Any]] = []
        if chunk_type is not None:
            conditions.append({"chunk_type": chunk_type})
        if max_turn_id is not None:
            conditions.append({"turn_id": {"$lte": int(max_turn_id)}})
        page = self._get_paged(str(save_id), _where(conditions), include=["documents", "metadatas"])
        rows = [self._result_row(i, d, m) for i, d, m in zip(page["ids"], page["documents"], page["metadatas"])]
        rows.sort(key=lambda row: (row["turn_id"], row["chunk_type"], row["metadata"].get("chunk_seq", 0)))
        return rows

    @staticmethod
    def _result_row(chunk_id: str, text: str, metadata: dict[str, Any]) -> dict[str, Any]:
        metadata = dict(metadata or {})
        row = {key: value for key, value in metadata.items() if key not in ("id", "text", "metadata", "explain")}
        row.update(
            id=chunk_id,
            text=text,
            turn_id=int(metadata.get("turn_id", 0)),
            chunk_type=metadata.get("chunk_type", "narrative"),
            entry_id=metadata.get("entry_id"),
            metadata=metadata,
        )
        return row

    def _index_terms(self, text: str) -> list[str]:
        return lexical.index_terms(
            text, stop_words=self.config.stop_words, fold_inflections=self.config.fold_inflections
        )

    def set_config(self, config: RetrievalConfig) -> None:
        """Switch the search pipeline's knobs (drops the cached indexes)."""
        with self._corpora_lock:
            self.config = config
            self._corpora.clear()

    def _corpus(self, scope_id: str, stats: QueryStats) -> _Corpus:
        """Return the scope's cached corpus, reloading it when its version moved."""
        version = self._versions.current(scope_id)
        with self._corpora_lock:
            cached = self._corpora.get(scope_id)
            if cached is not None and cached.version == version:
                self._corpora.move_to_end(scope_id)
                return cached
        try:
            rows = self._load_rows(scope_id, cached)
        except Exception as exc:
            if cached is None or not is_store_failure(exc):
                raise
            # The store is down: answer from the last corpus this process saw (it may miss
            # the newest chunks) rather than failing the whole query.
            stats.vector_store_error = f"{type(exc).__name__}: {exc}"[:300]
            logger.warning("vector store unreachable, querying the cached corpus of %s: %s", scope_id, exc)
            return cached
        rows.sort(
            key=lambda row: (int(row[2].get("turn_id", 0)), str(row[2].get("chunk_type", "")), row[2].get("chunk_seq", 0)),
        )
        ids = [row[0] for row in rows]
        texts = [row[1] or "" for row in rows]
        metadatas = [row[2] or {} for row in rows]
        corpus = _Corpus(
            version=version,
            ids=ids,
            texts=texts,
            metadatas=metadatas,
            turn_ids=np.asarray([int(m.get("turn_id", 0)) for m in metadatas], dtype=np.int64),
            chunk_types=np.asarray([str(m.get("chunk_type", "")) for m in metadatas], dtype=object),
            position={chunk_id: index for index, chunk_id in enumerate(ids)},
            terms=[row[3] for row in rows],
        )
        stats.corpus_rebuilt = True
        with self._corpora_lock:
            self._corpora[scope_id] = corpus
            self._corpora.move_to_end(scope_id)
            while len(self._corpora) > self.config.max_cached_scopes:
                self._corpora.popitem(last=False)
        return corpus

    def _load_rows(self, scope_id: str, cached: _Corpus | None) -> list[tuple[str, str, dict, list[str]]]:
        """Return (id, text, metadata, index terms) of every chunk in the scope.

        With an older cached corpus at hand only the ids are listed, and just the new
        chunks are fetched and tokenised (chunks are never modified in place: a change is
        a new id plus a deleted one), so a turn's write costs a page of ids, not the save.
        """
        if cached is None:
            page = self._get_paged(scope_id, None, include=["documents", "metadatas"])
            return [
                (chunk_id, text or "", metadata or {}, self._index_terms(text or ""))
                for chunk_id, text, metadata in zip(page["ids"], page["documents"], page["metadatas"])
            ]
        current = self._get_paged(scope_id, None, include=[])["ids"]
        rows = []
        missing = []
        for chunk_id in current:
            position = cached.position.get(chunk_id)
            if position is None:
                missing.append(chunk_id)
            else:
                rows.append((chunk_id, cached.texts[position], cached.metadatas[position], cached.terms[position]))
        for start in range(0, len(missing), GET_PAGE_SIZE):
            wanted = missing[start : start + GET_PAGE_SIZE]
            page = self._call(
                scope_id,
                lambda collection: collection.get(ids=wanted, include=["documents", "metadatas"]),
                create=False,
                default={"ids": [], "documents": [], "metadatas": []},
            )
            for chunk_id, text, metadata in zip(page["ids"], page["documents"], page["metadatas"]):
                rows.append((chunk_id, text or "", metadata or {}, self._index_terms(text or "")))
        return rows

    def _view(self, corpus: _Corpus, chunk_type: str | None, exclude_chunk_type: str | None, horizon: int | None) -> _View:
        mask = np.ones(len(corpus.ids), dtype=bool)
        if chunk_type is not None:
            mask &= corpus.chunk_types == chunk_type
        if exclude_chunk_type is not None:
            mask &= corpus.chunk_types != exclude_chunk_type
        if horizon is not None:
            in_horizon = corpus.turn_ids <= horizon
            if not np.all(in_horizon[mask]):
                mask &= in_horizon
            else:
                horizon = None  # the horizon cuts nothing: share the unbounded view
        key = (chunk_type, exclude_chunk_type, horizon)
        with corpus.lock:
            view = corpus.views.get(key)
            if view is not None:
                corpus.views.move_to_end(key)
                return view
            view = self._build_view(corpus, np.flatnonzero(mask))
            corpus.views[key] = view
            while len(corpus.views) > self.config.max_views_per_scope:
                corpus.views.popitem(last=False)
            return view

    def _build_view(self, corpus: _Corpus, positions: np.ndarray) -> _View:
        """Build the BM25 indexes of the chunks at `positions` (in corpus order)."""
        own_docs = [corpus.terms[p] for p in positions]
        count = len(positions)
        turns = corpus.turn_ids[positions]
        types = corpus.chunk_types[positions]
        is_lore = types == LORE
        # Groups: runs of chunks of one turn and type; each lore entry is a group of its own
        # (entries are unrelated to each other).
        starts_group = np.ones(count, dtype=bool)
        if count:
            starts_group[1:] = (turns[1:] != turns[:-1]) | (types[1:] != types[:-1]) | is_lore[1:] | is_lore[:-1]
        group_of = np.cumsum(starts_group) - 1
        group_starts = np.flatnonzero(starts_group)
        group_ends = np.append(group_starts[1:], count)
        # Neighbouring context: chunk i reads the chunks within `window` of it in its group.
        window = max(0, self.config.context_window)
        index = np.arange(count)
        low = np.maximum(group_starts[group_of], index - window) if count else index
        high = np.minimum(group_ends[group_of], index + window + 1) if count else index
        fanout = high - low
        context_indptr = np.concatenate([[0], np.cumsum(fanout)]).astype(np.int64)
        context_targets = (
            np.repeat(low, fanout) + (np.arange(fanout.sum()) - np.repeat(context_indptr[:-1], fanout))
        ).astype(np.int64)
        turn_indptr = np.arange(count + 1, dtype=np.int64)

        own_index = context_index = turn_index = None
        if lexical.is_available() and count:
            config = self.config
            own_index = lexical.PostingsBM25(own_docs, k1=config.bm25_k1, b=config.bm25_b)
            context_index = lexical.AggregatedBM25(
                own_index, context_indptr, context_targets, count, k1=config.bm25_k1, b=config.bm25_b
            )
            turn_index = lexical.AggregatedBM25(
                own_index, turn_indptr, group_of.astype(np.int64), len(group_starts), k1=config.bm25_k1, b=config.bm25_b
            )
        member = np.zeros(len(corpus.ids), dtype=bool)
        member[positions] = True
        return _View(
            member=member,
            positions=positions,
            own_index=own_index,
            context_index=context_index,
            turn_index=turn_index,
            turn_of_position=group_of.astype(np.int64),
        )

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

    def _semantic_arm(self, scope_id, query_vector, where, depth) -> tuple[list[str], dict[str, float]]:
        response = self._call(
            str(scope_id),
            lambda collection: collection.query(
                query_embeddings=[np.asarray(query_vector, dtype=np.float32)],
                n_results=depth,
                where=where,
                include=["distances"],
            ),
            create=False,
            default={"ids": [], "distances": []},
        )
        ids = response["ids"][0] if response["ids"] else []
        distances = response["distances"][0] if response.get("distances") else []
        return list(ids), {chunk_id: float(distance) for chunk_id, distance in zip(ids, distances)}

    def _filters(self, horizon, chunk_type, exclude_chunk_type) -> dict[str, Any] | None:
        """The `where` of a scope's collection (the save needs no condition: it is the collection)."""
        conditions: list[dict[str, Any]] = []
        if horizon is not None:
            conditions.append({"turn_id": {"$lte": int(horizon)}})
        if chunk_type is not None:
            conditions.append({"chunk_type": str(chunk_type)})
        if exclude_chunk_type is not None:
            conditions.append({"chunk_type": {"$ne": str(exclude_chunk_type)}})
        return _where(conditions)

    def _arms(self, save_id, query_text, horizon, chunk_type, exclude_chunk_type, depth, stats, timer, *, full=False):
        """Run every arm; return (corpus, view, arms) with arms = name -> (ranked ids, scores)."""
        corpus = self._corpus(str(save_id), stats)
        timer.lap("corpus")
        view = self._view(corpus, chunk_type, exclude_chunk_type, horizon)
        stats.corpus_size = len(corpus.ids)
        stats.filtered_size = len(view.positions)
        timer.lap("index")
        arms: dict[str, tuple[list[str], dict[str, float]]] = {}
        enabled = self.config.arms
        embedder = self._get_embedder() if "semantic" in enabled else None
        stats.semantic_available = embedder is not None
        if stats.vector_store_error:
            stats.semantic_available = False
        elif embedder is not None and len(view.positions):
            query_vector = embedder.encode([query_text], batch_size=1)[0]
            timer.lap("embed_query")
            semantic_depth = len(view.positions) if full else depth
            # A Chroma `where` costs a metadata scan of the rows it matches (measured on a
            # 10k-chunk collection: ~1 ms without, ~70-100 ms with), while the save is the
            # collection itself. So the query goes without `where` when the cached corpus
            # shows the filters exclude nothing or only a few chunks: those are fetched
            # too and dropped here. Only a filter cutting many chunks goes to Chroma.
            excluded = len(corpus.ids) - len(view.positions)
            if excluded <= 3 * semantic_depth:
                where = None
                fetch = semantic_depth + excluded
            else:
                where = self._filters(horizon, chunk_type, exclude_chunk_type)
                fetch = semantic_depth
            try:
                ids, distances = self._semantic_arm(save_id, query_vector, where, fetch)
            except Exception as exc:
                if not is_store_failure(exc):
                    raise
                # The lexical arms run on the cached corpus: the query degrades, it does not fail.
                stats.semantic_available = False
                stats.vector_store_error = f"{type(exc).__name__}: {exc}"[:300]
                logger.warning("vector store unreachable, semantic arm skipped for %s: %s", save_id, exc)
                ids, distances = [], {}
            # Keep chunks that pass the filter and were in the snapshot (not written since).
            ids = [
                chunk_id for chunk_id in ids
                if chunk_id in corpus.position and view.member[corpus.position[chunk_id]]
            ][:semantic_depth]
            arms["semantic"] = (ids, distances)
            timer.lap("semantic")
        stats.lexical_available = lexical.is_available()
        terms = self._index_terms(query_text)
        if view.own_index is not None and terms and {"lexical", "context", "turn"} & set(enabled):
            top = None if full else depth
            own = view.own_index.get_scores(terms)
            context = view.context_index.get_scores(terms)
            turn_scores = view.turn_index.get_scores(terms)
            # Only positive scores count as lexical signal here: in a small corpus BM25Okapi
            # gives a term found in most documents a negative IDF.
            own = np.where(own > 0, own, 0.0)
            context = np.where(context > 0, context, 0.0)
            turn_scores = np.where(turn_scores > 0, turn_scores, 0.0)
            for name, scores in (("lexical", own), ("context", context)):
                ranked = lexical._ranked_indices(scores, top)
                arms[name] = (
                    [corpus.ids[view.positions[i]] for i in ranked],
                    {corpus.ids[view.positions[i]]: float(scores[i]) for i in ranked},
                )
            # Turn arm: chunks of the best-matching turns, each turn's chunks by own score.
            per_chunk_turn = turn_scores[view.turn_of_position]
            candidates = np.flatnonzero((per_chunk_turn > 0) & (own > 0))
            order = np.lexsort((np.arange(len(candidates)), -own[candidates], -per_chunk_turn[candidates]))
            ranked = candidates[order] if full else candidates[order][:depth]
            arms["turn"] = (
                [corpus.ids[view.positions[i]] for i in ranked],
                {corpus.ids[view.positions[i]]: float(per_chunk_turn[i]) for i in ranked},
            )
            timer.lap("lexical")
        arms = {name: arm for name, arm in arms.items() if name in enabled}
        stats.arm_sizes = {name: len(ranked) for name, (ranked, _scores) in arms.items()}
        return corpus, view, arms

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
    ) -> QueryResult:
        """Run `query` and return its results together with the stage timings.

        `expand_links`: for each lore hit, also return the lore entries it links to (one
        hop, at most config.link_expansion_cap in all), after the top k, each marked with
        explain["expanded_from"] = the linking entry's entry_id.
        """
        stats = QueryStats()
        self._local.stats = stats
        timer = _Timer(stats)
        if k <= 0 or not str(query_text or "").strip():
            timer.total()
            return QueryResult([], stats)
        horizon = _horizon(current_turn_id, max_turn_id)
        config = self.config
        depth = max(config.arm_depth, 2 * k)
        corpus, view, arms = self._arms(save_id, query_text, horizon, chunk_type, exclude_chunk_type, depth, stats, timer)
        if not arms:
            timer.total()
            return QueryResult([], stats)
        weights = {
            "semantic": config.semantic_weight,
            "lexical": config.lexical_weight,
            "context": config.context_weight,
            "turn": config.turn_weight,
        }
        names = list(arms)
        fused = fusion.reciprocal_rank_fusion(
            [fusion.cap_per_source(arms[name][0], depth) for name in names],
            k=config.rrf_k,
            weights=[weights[name] for name in names],
        )
        ranks = {name: {chunk_id: rank for rank, chunk_id in enumerate(arms[name][0], start=1)} for name in names}
        timer.lap("fusion")

        focus = [" " + " ".join(lexical.tokenize(term)) + " " for term in focus_terms or []]
        focus = [term for term in focus if term.strip()]
        candidates = []
        for fused_rank, (chunk_id, rrf_score) in enumerate(fused, start=1):
            position = corpus.position[chunk_id]
            boost = 0.0
            if focus and _mentions(" " + " ".join(lexical.tokenize(corpus.texts[position])) + " ", focus):
                boost = config.focus_boost
            candidates.append([chunk_id, rrf_score + boost, rrf_score, boost, fused_rank, None])
        if focus:
            candidates.sort(key=lambda c: (-c[1], c[4]))
        timer.lap("focus")

        if use_reranker and self.reranker is not None and candidates and config.rerank_pool > 0:
            pool = candidates[: config.rerank_pool]
            scores = self.reranker.rerank(query_text, [corpus.texts[corpus.position[c[0]]] for c in pool])
            if scores is not None and len(scores) == len(pool):
                for candidate, score in zip(pool, scores):
                    candidate[5] = float(score)
                order = sorted(range(len(pool)), key=lambda i: (-pool[i][5], i))
                candidates = [pool[i] for i in order] + candidates[len(pool) :]
                stats.reranked = True
            timer.lap("rerank")

        results = []
        for final_rank, (chunk_id, score, rrf_score, boost, fused_rank, rerank_score) in enumerate(candidates[:k], start=1):
            position = corpus.position[chunk_id]
            row = self._result_row(chunk_id, corpus.texts[position], corpus.metadatas[position])
            distance = arms.get("semantic", ([], {}))[1].get(chunk_id)
            row["distance"] = distance
            row["score"] = score
            row["explain"] = {
                "semantic_rank": ranks.get("semantic", {}).get(chunk_id),
                "semantic_distance": distance,
                "lexical_rank": ranks.get("lexical", {}).get(chunk_id),
                "bm25_score": arms.get("lexical", ([], {}))[1].get(chunk_id),
                "context_rank": ranks.get("context", {}).get(chunk_id),
                "context_bm25_score": arms.get("context", ([], {}))[1].get(chunk_id),
                "turn_rank": ranks.get("turn", {}).get(chunk_id),
                "rrf_score": rrf_score,
                "fused_rank": fused_rank,
                "focus_boost": boost,
                "rerank_score": rerank_score,
                "final_rank": final_rank,
                "expanded_from": None,
            }
            results.append(row)
        if expand_links:
            results.extend(self._expand_links(corpus, view, results))
            timer.lap("expand")
        timer.total()
        return QueryResult(results, stats)

    def _expand_links(self, corpus: _Corpus, view: _View, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Return the lore entries linked from lore hits (one hop, capped), not already present."""
        present = {row["entry_id"] for row in results if row.get("entry_id")}
        lore_by_entry: dict[str, int] = {}
        for position in view.positions:
            metadata = corpus.metadatas[position]
            if metadata.get("chunk_type") == LORE and metadata.get("entry_id") and metadata.get("chunk_part", 0) == 0:
                lore_by_entry.setdefault(str(metadata["entry_id"]), int(position))
        expanded = []
        for row in results:
            if row.get("chunk_type") != LORE or not row.get("entry_id"):
                continue
            links = row["metadata"].get("links") or []
            if isinstance(links, str):
                links = [links]
            for linked in links:
                if len(expanded) >= self.config.link_expansion_cap:
                    return expanded
                if linked in present or linked not in lore_by_entry:
                    continue
                position = lore_by_entry[linked]
                extra = self._result_row(corpus.ids[position], corpus.texts[position], corpus.metadatas[position])
                extra["distance"] = None
                extra["score"] = 0.0
                extra["explain"] = {
                    "semantic_rank": None,
                    "semantic_distance": None,
                    "lexical_rank": None,
                    "bm25_score": None,
                    "context_rank": None,
                    "context_bm25_score": None,
                    "turn_rank": None,
                    "rrf_score": 0.0,
                    "fused_rank": None,
                    "focus_boost": 0.0,
                    "rerank_score": None,
                    "final_rank": None,
                    "expanded_from": row["entry_id"],
                }
                present.add(linked)
                expanded.append(extra)
        return expanded

    def _find_chunk(self, scope_id: str, chunk_id: str) -> dict[str, list]:
        """Fetch one chunk: from the scope's collection, else from the other scopes' (a
        diagnostic path only: it reads every scope collection of this store)."""
        empty: dict[str, list] = {"ids": [], "documents": [], "metadatas": []}

        def fetch(collection):
            return collection.get(ids=[chunk_id], include=["documents", "metadatas"])

        found = self._call(scope_id, fetch, create=False, default=empty)
        if found["ids"]:
            return found
        own_name = self.collection_name_for(scope_id)
        prefix = self.collection_name + "-"
        try:
            others = self._client.list_collections()
        except Exception as exc:
            raise VectorStoreError(f"Chroma unavailable ({self.store_description}): {exc}") from exc
        for other in others:
            name = other if isinstance(other, str) else other.name
            if not name.startswith(prefix) or name == own_name:
                continue
            try:
                found = self._client.get_collection(name, embedding_function=None).get(
                    ids=[chunk_id], include=["documents", "metadatas"]
                )
            except Exception as exc:
                if _is_not_found(exc):
                    continue
                raise
            if found["ids"]:
                return found
        return empty

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
    ) -> dict[str, Any]:
        """Explain where one chunk ranked for a query ("why not this chunk?").

        Return {"chunk": row or None, "filtered_out": reason or None, "ranks": {arm: rank
        over the whole filtered corpus}, "scores": {arm: score}, "fused_rank",
        "final_rank" (None when not in the top k), "k", "filtered_size"}. Ranks here are
        exact over the filtered corpus, not cut at the arm depth a search uses
        (`arm_depth` says where an arm stops contributing).
        """
        stats = QueryStats()
        timer = _Timer(stats)
        horizon = _horizon(current_turn_id, max_turn_id)
        report: dict[str, Any] = {
            "chunk": None,
            "filtered_out": None,
            "ranks": {},
            "scores": {},
            "fused_rank": None,
            "final_rank": None,
            "k": k,
            "arm_depth": max(self.config.arm_depth, 2 * k),
            "filtered_size": 0,
        }
        found = self._find_chunk(str(save_id), chunk_id)
        if not found["ids"]:
            report["filtered_out"] = "no such chunk"
            return report
        metadata = found["metadatas"][0] or {}
        report["chunk"] = self._result_row(chunk_id, found["documents"][0], metadata)
        if str(metadata.get("save_id")) != str(save_id):
            report["filtered_out"] = f"belongs to save {metadata.get('save_id')!r}"
        elif horizon is not None and int(metadata.get("turn_id", 0)) > horizon:
            report["filtered_out"] = f"turn {metadata.get('turn_id')} is after the horizon (turn {horizon})"
        elif chunk_type is not None and metadata.get("chunk_type") != chunk_type:
            report["filtered_out"] = f"chunk type {metadata.get('chunk_type')!r} is not {chunk_type!r}"
        elif exclude_chunk_type is not None and metadata.get("chunk_type") == exclude_chunk_type:
            report["filtered_out"] = f"chunk type {exclude_chunk_type!r} is excluded"
        if report["filtered_out"]:
            return report
        _corpus, view, arms = self._arms(
            save_id, query_text, horizon, chunk_type, exclude_chunk_type, 0, stats, timer, full=True
        )
        report["filtered_size"] = len(view.positions)
        for name, (ranked, scores) in arms.items():
            if chunk_id in scores:
                report["ranks"][name] = ranked.index(chunk_id) + 1
                report["scores"][name] = scores[chunk_id]
        outcome = self.query_explained(
            save_id,
            query_text,
            k=max(k, 1),
            current_turn_id=current_turn_id,
            max_turn_id=max_turn_id,
            focus_terms=focus_terms,
            chunk_type=chunk_type,
            exclude_chunk_type=exclude_chunk_type,
        )
        for row in outcome.results:
            if row["id"] == chunk_id:
                report["final_rank"] = row["explain"]["final_rank"]
                report["fused_rank"] = row["explain"]["fused_rank"]
        return report


# --- Process-wide instance -----------------------------------------------------------------

_instance: VectorMemory | None = None
_instance_pid: int | None = None
_instance_lock = threading.Lock()


def get_configured_reranker():
    """Return a CrossEncoderReranker for settings.AXIOM_RERANKER_MODEL, or None when unset."""
    from django.conf import settings

    name = getattr(settings, "AXIOM_RERANKER_MODEL", "") or ""
    if not name:
        return None
    from studio.memory.retrieval.reranker import CrossEncoderReranker

    return CrossEncoderReranker(model_name=name)


def build_vector_memory() -> VectorMemory:
    """Build a VectorMemory from settings (read now, not at import).

    settings.CHROMA_HOST set: an HttpClient to that Chroma server (CHROMA_PORT), which any
    number of processes may share. Otherwise the embedded store at settings.CHROMA_PATH,
    locked to this process: a second process gets VectorStoreLockedError at once.
    """
    from django.conf import settings

    rerank_pool = int(getattr(settings, "AXIOM_RERANK_POOL", RetrievalConfig.rerank_pool))
    reranker = get_configured_reranker()
    host = (getattr(settings, "CHROMA_HOST", "") or "").strip()
    if host:
        import chromadb
        from chromadb.config import Settings

        try:
            client = chromadb.HttpClient(
                host=host,
                port=int(getattr(settings, "CHROMA_PORT", 8000)),
                settings=Settings(anonymized_telemetry=False),
            )
        except Exception as exc:
            raise VectorStoreError(
                f"Cannot reach the Chroma server at {host}:{getattr(settings, 'CHROMA_PORT', 8000)} "
                f"(CHROMA_HOST/CHROMA_PORT): {exc}"
            ) from exc
        return VectorMemory(None, reranker, client=client, rerank_pool=rerank_pool)
    return VectorMemory(settings.CHROMA_PATH, reranker, rerank_pool=rerank_pool)


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
