"""The vector store: a Chroma client, its process lock, and one collection per scope.

Layout: one Chroma collection per scope (a save id, or a universe lore scope such as
"universe-12"), named `scope_collection_name(scope)` and carrying {"scope_id": scope} in its
metadata; every chunk is one row (id = a UUID, document = the text, our own embedding, the
metadata of `chunks.py`). docs/retrieval.md ("Storage layout") has the measured decision.

Invariants:
- Chroma's own embedding function is never attached: every collection is opened with
  `embedding_function=None` and every write passes our vectors, so nothing downloads a model.
- A collection's metadata names its scope, checked on every lookup: a name collision can
  never hand one save another save's chunks.
- Every bulk read goes page by page (`GET_PAGE_SIZE`): Chroma fails a `get()` returning more
  than 32,766 rows with documents (SQLite's variable limit).
- The embedded `PersistentClient` is for one process only. `acquire_store_lock` takes an
  exclusive, non-blocking `flock` on the store directory (re-entrant within the process, and
  refused to a forked child of the holder); two processes writing one embedded store corrupt
  its HNSW index silently, so a second one fails at once with a message naming the fix (a
  Chroma server through `HttpClient`, where no lock is taken).
- Chunks still in the old shared "narrative_memory" collection move to their scope's own
  collection on the scope's first access in a process (same ids, texts, metadata and stored
  embeddings, by `upsert`, so two processes migrating at once write identical rows); the
  shared collection is dropped once empty.

Failure modes: a collection that cannot be opened raises VectorStoreError
(VectorStoreLockedError for the lock); any other failing call raises the chromadb / httpx
error it hit (`is_store_failure` recognises both, so callers can degrade or answer 503).
A collection dropped by another process since this one cached its handle raises Chroma's
NotFoundError: `ChunkStore.call` forgets the handle and retries once. Writes here never
bump corpus versions themselves: the caller does, after the write (see corpus.py); only the
legacy move reports its writes through `on_change`.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import logging
import os
import re
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

COLLECTION_NAME = "narrative_memory"  # prefix of every scope's collection; also the legacy shared collection
LOCK_FILE_NAME = ".axiom-vector-store.lock"
MAX_COLLECTION_NAME = 512  # Chroma: 3-512 chars of [a-zA-Z0-9._-], alphanumeric at both ends, no ".."
_CLEAN_SCOPE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?\Z")
# Chroma fails a get() that returns more than 32,766 rows with documents (SQLite variable
# limit); every bulk read goes page by page.
GET_PAGE_SIZE = 5000
# A Chroma server that is down or restarting surfaces as an error of its HTTP client (or of
# chromadb itself) from whichever collection call was running.
STORE_CLIENT_MODULES = ("chromadb", "httpx", "httpcore")


class VectorStoreError(RuntimeError):
    """The vector store (Chroma) cannot be reached or used."""


class VectorStoreLockedError(VectorStoreError):
    """Another process already has the embedded Chroma store open."""


def is_store_failure(exc: BaseException) -> bool:
    """True for an error that means the vector store cannot be reached or used right now."""
    if isinstance(exc, VectorStoreError):
        return True
    return (type(exc).__module__ or "").split(".")[0] in STORE_CLIENT_MODULES


def is_not_found(exc: Exception) -> bool:
    """True when `exc` is Chroma's "no such collection"."""
    try:
        from chromadb.errors import NotFoundError
    except Exception:  # pragma: no cover
        return False
    return isinstance(exc, NotFoundError)


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


def where_clause(conditions: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Combine Chroma `where` conditions (None for none, the condition itself for one)."""
    if not conditions:
        return None
    if len(conditions) == 1:
        return conditions[0]
    return {"$and": conditions}


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


# --- The collections of one client ---------------------------------------------------------


class ChunkStore:
    """The scopes' Chroma collections behind one client, with the legacy move.

    Build it with `ChunkStore.open_embedded(path)` (locks `path` for this process) or
    `ChunkStore(client)` (any chromadb client, e.g. an HttpClient; no lock). `on_change(scope)`
    is called after the legacy move wrote chunks into a scope, so the caller's caches reload.
    """

    def __init__(
        self,
        client: Any,
        *,
        collection_name: str = COLLECTION_NAME,
        on_change: Callable[[str], None] | None = None,
        persist_dir: str | None = None,
        owns_lock: bool = False,
    ) -> None:
        self.client = client
        self.collection_name = collection_name
        self.persist_dir = persist_dir
        self.owns_lock = owns_lock
        self._on_change = on_change or (lambda scope_id: None)
        self._collections: dict[str, Any] = {}  # scope id -> its Chroma collection
        self._collections_lock = threading.Lock()
        self._legacy: Any = None  # the old shared collection: None = not looked up yet, False = absent
        self._legacy_checked: set[str] = set()
        self._legacy_lock = threading.Lock()

    @classmethod
    def open_embedded(cls, persist_dir: str, **kwargs: Any) -> ChunkStore:
        """Lock `persist_dir` for this process and open the embedded PersistentClient there."""
        acquire_store_lock(persist_dir)
        try:
            import chromadb
            from chromadb.config import Settings

            client = chromadb.PersistentClient(path=persist_dir, settings=Settings(anonymized_telemetry=False))
        except Exception:
            release_store_lock(persist_dir)
            raise
        return cls(client, persist_dir=persist_dir, owns_lock=True, **kwargs)

    def close(self) -> None:
        """Release the embedded store's process lock (the client itself is process-cached)."""
        if self.owns_lock and self.persist_dir is not None:
            release_store_lock(self.persist_dir)
            self.owns_lock = False

    @property
    def description(self) -> str:
        if self.owns_lock:
            return f"embedded store at {self.persist_dir}"
        return f"Chroma client {type(self.client).__name__}"

    def _unavailable(self, exc: Exception) -> VectorStoreError:
        return VectorStoreError(f"Chroma unavailable ({self.description}): {exc}")

    # -- collections --

    def collection_name_for(self, scope_id: str) -> str:
        """Return the name of the scope's Chroma collection (see `scope_collection_name`)."""
        return scope_collection_name(str(scope_id), self.collection_name)

    def collection(self, scope_id: str, *, create: bool):
        """Return the scope's collection, cached per process (None: missing, `create` False)."""
        scope = str(scope_id)
        with self._collections_lock:
            cached = self._collections.get(scope)
        if cached is not None:
            return cached
        self.migrate_legacy(scope)
        name = self.collection_name_for(scope)
        try:
            if create:
                collection = self.client.get_or_create_collection(
                    name,
                    embedding_function=None,
                    configuration={"hnsw": {"space": "cosine"}},
                    metadata={"scope_id": scope},
                )
            else:
                try:
                    collection = self.client.get_collection(name, embedding_function=None)
                except Exception as exc:
                    if not is_not_found(exc):
                        raise
                    return None
        except Exception as exc:
            raise self._unavailable(exc) from exc
        owner = (collection.metadata or {}).get("scope_id")
        if owner is not None and str(owner) != scope:
            raise VectorStoreError(f"collection {name!r} belongs to scope {owner!r}, not {scope!r}")
        with self._collections_lock:
            self._collections[scope] = collection
        return collection

    def forget(self, scope_id: str) -> None:
        """Drop the cached handle of the scope's collection."""
        with self._collections_lock:
            self._collections.pop(str(scope_id), None)

    def call(self, scope_id: str, action, *, create: bool, default: Any = None):
        """Run action(collection) on the scope's collection; retry once if it was dropped meanwhile.

        Return `default` when the collection does not exist and `create` is False.
        """
        for attempt in (0, 1):
            collection = self.collection(scope_id, create=create)
            if collection is None:
                return default
            try:
                return action(collection)
            except Exception as exc:
                if not is_not_found(exc):
                    raise
                # Dropped (delete_save) by this or another process since we cached it.
                self.forget(scope_id)
                if attempt:
                    raise VectorStoreError(f"collection of {scope_id!r} vanished: {exc}") from exc
        return default

    # -- reads --

    def get_paged(self, scope_id: str, where: dict[str, Any] | None, include: list[str]) -> dict[str, list]:
        """Return ids (and the `include`d fields) of the scope's chunks matching `where`, paged."""
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

        return self.call(scope_id, read, create=False, default=out)

    def get_by_ids(self, scope_id: str, ids: list[str]) -> dict[str, list]:
        """Return the documents and metadatas of the given chunks (at most one page of ids)."""
        return self.call(
            scope_id,
            lambda collection: collection.get(ids=ids, include=["documents", "metadatas"]),
            create=False,
            default={"ids": [], "documents": [], "metadatas": []},
        )

    def get_embeddings(self, scope_id: str, ids: list[str]) -> dict[str, np.ndarray]:
        """Return the stored vectors of the given chunks that exist, by id, a page at a time."""
        out: dict[str, np.ndarray] = {}
        for start in range(0, len(ids), GET_PAGE_SIZE):
            page = self.call(
                scope_id,
                lambda collection, part=ids[start : start + GET_PAGE_SIZE]: collection.get(
                    ids=part, include=["embeddings"]
                ),
                create=False,
                default={"ids": [], "embeddings": []},
            )
            for chunk_id, vector in zip(page["ids"], page["embeddings"] if page["embeddings"] is not None else []):
                out[chunk_id] = np.asarray(vector, dtype=np.float32)
        return out

    def count(self, scope_id: str) -> int:
        """Return the number of chunks in the scope's collection (0 when it has none)."""
        return int(self.call(str(scope_id), lambda collection: collection.count(), create=False, default=0))

    def nearest(self, scope_id: str, query_vector, where: dict[str, Any] | None, n_results: int):
        """Return (ids, {id: cosine distance}) of the `n_results` chunks nearest the vector."""
        response = self.call(
            str(scope_id),
            lambda collection: collection.query(
                query_embeddings=[np.asarray(query_vector, dtype=np.float32)],
                n_results=n_results,
                where=where,
                include=["distances"],
            ),
            create=False,
            default={"ids": [], "distances": []},
        )
        ids = response["ids"][0] if response["ids"] else []
        distances = response["distances"][0] if response.get("distances") else []
        return list(ids), {chunk_id: float(distance) for chunk_id, distance in zip(ids, distances)}

    def find_chunk(self, scope_id: str, chunk_id: str) -> dict[str, list]:
        """Fetch one chunk: from the scope's collection, else from the other scopes' (a
        diagnostic path only: it reads every scope collection of this store)."""
        empty: dict[str, list] = {"ids": [], "documents": [], "metadatas": []}

        def fetch(collection):
            return collection.get(ids=[chunk_id], include=["documents", "metadatas"])

        found = self.call(scope_id, fetch, create=False, default=empty)
        if found["ids"]:
            return found
        own_name = self.collection_name_for(scope_id)
        prefix = self.collection_name + "-"
        try:
            others = self.client.list_collections()
        except Exception as exc:
            raise self._unavailable(exc) from exc
        for other in others:
            name = other if isinstance(other, str) else other.name
            if not name.startswith(prefix) or name == own_name:
                continue
            try:
                found = self.client.get_collection(name, embedding_function=None).get(
                    ids=[chunk_id], include=["documents", "metadatas"]
                )
            except Exception as exc:
                if is_not_found(exc):
                    continue
                raise
            if found["ids"]:
                return found
        return empty

    # -- writes --

    def upsert(self, scope_id: str, ids: list[str], embeddings, documents: list[str], metadatas: list[dict]) -> None:
        """Write chunks into the scope's collection (created on demand), in Chroma-sized batches."""
        try:
            batch = int(self.client.get_max_batch_size())
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

        self.call(scope_id, write, create=True)

    def delete_ids(self, scope_id: str, ids: list[str]) -> None:
        """Delete the given chunks from the scope's collection, a page at a time."""

        def delete(collection) -> None:
            for start in range(0, len(ids), GET_PAGE_SIZE):
                collection.delete(ids=ids[start : start + GET_PAGE_SIZE])

        self.call(scope_id, delete, create=False)

    def drop(self, scope_id: str) -> int | None:
        """Drop the scope's collection; return how many chunks it held (None: it had none).

        0 means another process dropped it meanwhile.
        """
        scope = str(scope_id)
        collection = self.collection(scope, create=False)
        if collection is None:
            return None
        try:
            deleted = collection.count()
            self.client.delete_collection(self.collection_name_for(scope))
        except Exception as exc:
            if not is_not_found(exc):
                raise
            deleted = 0  # dropped meanwhile by another process
        finally:
            self.forget(scope)
        return int(deleted)

    # -- the legacy shared collection --

    def _legacy_collection(self):
        """Return the old shared collection when it exists (looked up once per instance)."""
        if self._legacy is None:
            try:
                self._legacy = self.client.get_collection(self.collection_name, embedding_function=None)
            except Exception as exc:
                if not is_not_found(exc):
                    raise self._unavailable(exc) from exc
                self._legacy = False
        return self._legacy or None

    def migrate_legacy(self, scope: str) -> None:
        """Move the scope's chunks from the old shared collection into its own (once per process).

        Upserts keep each chunk's id, embedding, text and metadata, so two processes
        migrating at once write the same rows; the moved chunks are then deleted from the
        shared collection, which is dropped once empty. A failure leaves the scope to be
        tried again on its next access.
        """
        with self._legacy_lock:
            if self._legacy is False or scope in self._legacy_checked:
                return
            self._legacy_checked.add(scope)
        try:
            legacy = self._legacy_collection()
            if legacy is None:
                return
            moved: list[str] = []
            while True:  # page from offset 0: each page is deleted once copied
                page = legacy.get(
                    where={"save_id": scope},
                    include=["documents", "metadatas", "embeddings"],
                    limit=GET_PAGE_SIZE,
                )
                if not page["ids"]:
                    break
                if set(page["ids"]) & set(moved):  # a delete did not take: never loop forever
                    raise VectorStoreError(f"could not move the chunks of {scope!r} out of {self.collection_name!r}")
                target = self.collection(scope, create=True)
                target.upsert(
                    ids=page["ids"],
                    embeddings=np.asarray(page["embeddings"], dtype=np.float32),
                    documents=page["documents"],
                    metadatas=page["metadatas"],
                )
                legacy.delete(ids=page["ids"])
                moved.extend(page["ids"])
            if moved:
                logger.info("moved %d chunks of %r out of the shared collection", len(moved), scope)
                self._on_change(scope)
            if legacy.count() == 0:
                try:
                    self.client.delete_collection(self.collection_name)
                except Exception as exc:
                    if not is_not_found(exc):
                        raise
                self._legacy = False
        except Exception:
            with self._legacy_lock:
                self._legacy_checked.discard(scope)
            raise
