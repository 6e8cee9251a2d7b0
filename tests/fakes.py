"""The test doubles every test shares: one deterministic embedder, one fake vector store.

- `HashingEmbedder` stands in for MiniLM: a bag of words hashed into `dimension` buckets,
  L2-normalised, so texts sharing words are near each other and the same text always gets
  the same vector. It has the embedder surface VectorMemory uses (`encode`, `token_spans`,
  `max_tokens`) and records what it was asked to encode. Tests of the search pipeline run
  the real VectorMemory on it (`make_vector_memory`, the `vector_memory` fixture).
- `FakeVectorMemory` stands in for VectorMemory itself where a test is about what the code
  asks of the store (jobs, rewind, fork, the demo loader, lore sync): chunks kept in memory,
  the calls recorded, failures injectable. It follows the real store's contract where the
  callers depend on it (blank text stores nothing; `rollback` keeps turn_id <= target;
  `update_turn_narrative(s)` replace a turn's chunks of one type; queries honour the save,
  the horizon and the chunk type) and is deliberately stricter in one place: `copy_save` is
  not idempotent, so a caller that retries a half-done copy must clear it first.

Fixtures (made global by tests/conftest.py): `fake_vectors` (a FakeVectorMemory as
`studio.memory.vector.get_vector_memory()`, which the job handlers, checkpoints and the
universe services resolve), `vector_memory` (the real store on a temp dir, the same way)
and `stricter_clamp` (a stricter horizon rule in place of the one clamp, to show a caller
goes through `memory_search`).
"""

from __future__ import annotations

import hashlib
import itertools
import threading
import uuid

import numpy as np
import pytest

from studio.memory.embeddings.chunking import whitespace_spans
from studio.memory.retrieval.lexical import tokenize

# -- the embedder ---------------------------------------------------------------------------


class HashingEmbedder:
    """Bag-of-words vectors by hashing tokens: texts sharing words are close. Counts calls.

    Tokens are the lexical arm's (`tokenize`: lowercased, Unicode-aware), so "Kaël" is one
    word; a text with no word gets a fixed unit vector. `token_spans` splits on whitespace,
    which is what the chunker sees as tokens (`max_tokens` of them per chunk).
    """

    def __init__(self, dimension: int = 64, max_tokens: int = 254):
        self.dimension = dimension
        self.max_tokens = max_tokens
        self.encode_calls: list[list[str]] = []

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(self.dimension, dtype=np.float32)
        for token in tokenize(text):
            digest = hashlib.blake2b(token.encode(), digest_size=4).digest()
            vector[int.from_bytes(digest, "little") % self.dimension] += 1.0
        norm = np.linalg.norm(vector)
        if norm == 0:
            vector[0] = 1.0
            norm = 1.0
        return vector / norm

    def encode(self, texts, batch_size: int = 32) -> np.ndarray:
        self.encode_calls.append(list(texts))
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self._vector(text) for text in texts])

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return whitespace_spans(text)


_HASHING = object()


def make_vector_memory(path=None, *, embedder=_HASHING, client=None, **options):
    """A real VectorMemory on a fresh `HashingEmbedder`.

    `path`: an embedded Chroma directory; None (and no `client`): an in-memory Chroma client
    with a collection prefix of its own. `embedder=None` leaves VectorMemory its default
    (the packaged model, through `embedding.get_embedder`). Corpus versions are
    process-local unless `versions` is given; other options go to VectorMemory.
    """
    from studio.memory.vector import LocalCorpusVersions, VectorMemory

    if path is None and client is None:
        import chromadb
        from chromadb.config import Settings

        client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
        options.setdefault("collection_name", f"test_{uuid.uuid4().hex[:12]}")
    options.setdefault("versions", LocalCorpusVersions())
    if embedder is _HASHING:
        embedder = HashingEmbedder()
    return VectorMemory(None if path is None else str(path), client=client, embedder=embedder, **options)


# -- the vector store -----------------------------------------------------------------------


class VectorStoreDown(ConnectionError):
    """What FakeVectorMemory raises for an injected `fail_rollback` / `fail_copy`."""


class FakeVectorMemory:
    """An in-memory VectorMemory that records what it is asked.

    `chunks`: the stored chunks, in insertion order, each a dict with id, save_id, turn_id,
    text, chunk_type and entry_id (lore). `calls`: every call as a tuple (name, *arguments),
    except the ones adding chunks (`embed_chunk`, `embed_chunks`), which tests also use to
    seed the store; those count the items they were given in `embed_calls`. `bumps`: how
    many times a scope's corpus version moved (once per write that stored chunks, once per
    delete that removed some), as in VectorMemory.

    Failure hooks: `fail_with` (an exception) makes every recorded call raise it after being
    recorded; `fail_rollback = n` makes the next n `rollback` calls raise VectorStoreDown
    before deleting anything; `fail_copy = n` makes the next n `copy_save` calls copy half
    the chunks, then raise. `batch_api=False` is a store without the batch interface:
    `embed_chunks` and `get_chunks` read as None (the demo loader probes for them).
    """

    def __init__(self, *, batch_api: bool = True):
        self.chunks: list[dict] = []
        self.calls: list[tuple] = []
        self.embed_calls = 0
        self.bumps = 0
        self.fail_with: Exception | None = None
        self.fail_rollback = 0
        self.fail_copy = 0
        self.lock = threading.RLock()  # the in-process job pool calls from several threads
        self._ids = itertools.count(1)
        if not batch_api:
            self.embed_chunks = None
            self.get_chunks = None

    # -- what tests read --

    def named(self, name: str) -> list[tuple]:
        """The recorded calls of one method."""
        return [call for call in self.calls if call[0] == name]

    @property
    def sync_calls(self) -> list[str]:
        """The scopes `sync_lore` was called for, in order."""
        return [call[1] for call in self.named("sync_lore")]

    def turns(self, save_id) -> list[int]:
        """The turns a save has chunks for, sorted."""
        return sorted({c["turn_id"] for c in self.chunks if c["save_id"] == save_id})

    def texts(self, save_id) -> dict[int, list[str]]:
        """{turn: [texts]} of a save's narrative chunks."""
        out: dict[int, list[str]] = {}
        for chunk in self.chunks:
            if chunk["save_id"] == save_id and chunk["chunk_type"] == "narrative":
                out.setdefault(chunk["turn_id"], []).append(chunk["text"])
        return out

    # -- internals --

    def _record(self, name: str, *arguments) -> None:
        with self.lock:
            self.calls.append((name, *arguments))
        if self.fail_with is not None:
            raise self.fail_with

    def _store(self, save_id, turn_id, text, chunk_type="narrative", entry_id=None) -> str:
        chunk_id = f"c{next(self._ids)}"
        self.chunks.append(
            {
                "id": chunk_id,
                "save_id": save_id,
                "turn_id": int(turn_id),
                "text": text,
                "chunk_type": chunk_type,
                "entry_id": entry_id,
            }
        )
        return chunk_id

    def _delete(self, keep) -> int:
        """Drop the chunks `keep` rejects; return how many (one version bump if any)."""
        before = len(self.chunks)
        self.chunks = [chunk for chunk in self.chunks if keep(chunk)]
        gone = before - len(self.chunks)
        self.bumps += bool(gone)
        return gone

    def _add(self, save_id, items) -> list[str]:
        ids = []
        with self.lock:
            for item in items:
                text = item["text"]
                extra = item.get("metadata_extra") or {}
                ids.append(
                    self._store(
                        save_id, item["turn_id"], text, item.get("chunk_type", "narrative"), extra.get("entry_id")
                    )
                    if str(text).strip()
                    else ""
                )
            self.bumps += any(ids)
        return ids

    # -- writes --

    def embed_chunks(self, save_id, items, *, batch_size=32) -> list[str]:
        items = list(items)
        self.embed_calls += len(items)
        return self._add(save_id, items)

    def embed_chunk(self, save_id, turn_id, text, chunk_type="narrative", metadata_extra=None) -> str:
        self.embed_calls += 1
        return self._add(
            save_id, [{"turn_id": turn_id, "text": text, "chunk_type": chunk_type, "metadata_extra": metadata_extra}]
        )[0]

    def sync_lore(self, save_id, entries) -> int:
        entries = [dict(entry) for entry in entries]
        self._record("sync_lore", save_id, entries)
        with self.lock:
            self._delete(lambda c: not (c["save_id"] == save_id and c["chunk_type"] == "lore"))
            ids = self._add(
                save_id,
                [
                    {
                        "turn_id": 0,
                        "text": e["text"],
                        "chunk_type": "lore",
                        "metadata_extra": {"entry_id": e["entry_id"]},
                    }
                    for e in entries
                ],
            )
        return sum(bool(chunk_id) for chunk_id in ids)

    def rollback(self, save_id, target_turn_id) -> int:
        self._record("rollback", save_id, target_turn_id)
        if self.fail_rollback:
            self.fail_rollback -= 1
            raise VectorStoreDown("vector store unreachable")
        with self.lock:
            return self._delete(lambda c: not (c["save_id"] == save_id and c["turn_id"] > target_turn_id))

    def delete_save(self, save_id) -> int:
        self._record("delete_save", save_id)
        with self.lock:
            return self._delete(lambda c: c["save_id"] != save_id)

    def update_turn_narrative(self, save_id, turn_id, new_text, chunk_type="narrative") -> None:
        self._record("update_turn_narrative", save_id, turn_id, new_text)
        self._replace(save_id, {int(turn_id): new_text}, chunk_type)

    def update_turn_narratives(self, save_id, texts, chunk_type="narrative") -> None:
        texts = {int(turn): text for turn, text in texts.items()}
        self._record("update_turn_narratives", save_id, sorted(texts.items()))
        self._replace(save_id, texts, chunk_type)

    def _replace(self, save_id, texts: dict[int, str], chunk_type: str) -> None:
        with self.lock:
            old = [
                c["id"]
                for c in self.chunks
                if c["save_id"] == save_id and c["turn_id"] in texts and c["chunk_type"] == chunk_type
            ]
            self._add(
                save_id, [{"turn_id": turn, "text": texts[turn], "chunk_type": chunk_type} for turn in sorted(texts)]
            )
            self._delete(lambda c: c["id"] not in old)

    def copy_save(self, source_save_id, target_save_id, *, max_turn_id=None) -> int:
        self._record("copy_save", source_save_id, target_save_id, max_turn_id)
        with self.lock:
            source = [
                c
                for c in self.chunks
                if c["save_id"] == source_save_id and (max_turn_id is None or c["turn_id"] <= max_turn_id)
            ]
            failing = self.fail_copy > 0
            if failing:
                self.fail_copy -= 1
                source = source[: len(source) // 2]  # fail half-way: some chunks are copied
            for chunk in source:
                self._store(target_save_id, chunk["turn_id"], chunk["text"], chunk["chunk_type"], chunk["entry_id"])
            self.bumps += bool(source)
        if failing:
            raise VectorStoreDown("vector store unreachable mid-copy")
        return len(source)

    # -- reads --

    def count(self, save_id) -> int:
        return sum(chunk["save_id"] == save_id for chunk in self.chunks)

    def get_chunks(self, save_id, *, chunk_type=None, max_turn_id=None) -> list[dict]:
        rows = [
            dict(chunk)
            for chunk in self.chunks
            if chunk["save_id"] == save_id
            and (chunk_type is None or chunk["chunk_type"] == chunk_type)
            and (max_turn_id is None or chunk["turn_id"] <= max_turn_id)
        ]
        return sorted(rows, key=lambda row: (row["turn_id"], row["chunk_type"]))

    def query(
        self,
        save_id,
        query_text,
        k=5,
        current_turn_id=None,
        max_turn_id=None,
        focus_terms=None,
        chunk_type=None,
        exclude_chunk_type=None,
    ) -> list[dict]:
        """The save's chunks within the horizon and type filters, most shared words first
        (like a nearest-neighbour search, a chunk sharing no word may still fill the k)."""
        horizons = [turn for turn in (current_turn_id, max_turn_id) if turn is not None]
        horizon = min(horizons) if horizons else None
        words = set(tokenize(query_text))
        hits = [
            chunk
            for chunk in self.chunks
            if chunk["save_id"] == save_id
            and (horizon is None or chunk["turn_id"] <= horizon)
            and (chunk_type is None or chunk["chunk_type"] == chunk_type)
            and (exclude_chunk_type is None or chunk["chunk_type"] != exclude_chunk_type)
        ]
        hits.sort(key=lambda chunk: -len(words & set(tokenize(chunk["text"]))))
        return [dict(chunk) for chunk in hits[:k]]


# -- fixtures -------------------------------------------------------------------------------


@pytest.fixture
def fake_vectors(monkeypatch) -> FakeVectorMemory:
    """A FakeVectorMemory as the process's vector store (`get_vector_memory()`)."""
    vectors = FakeVectorMemory()
    monkeypatch.setattr("studio.memory.vector.get_vector_memory", lambda: vectors)
    return vectors


@pytest.fixture
def stricter_clamp(monkeypatch):
    """Swap the one horizon clamp (`search.memory_horizon`) for a stricter rule: one turn
    before the current one. A caller that re-typed the clamp instead of going through
    `memory_search` would keep answering with the current turn's chunks."""
    from studio.memory.recall import search

    def one_turn_back(*, game_save, turn_id=None):
        limit = game_save.current_turn - 1
        return limit if turn_id is None else min(int(turn_id), limit)

    monkeypatch.setattr(search, "memory_horizon", one_turn_back)


@pytest.fixture
def vector_memory(tmp_path, monkeypatch):
    """The real VectorMemory (embedded Chroma in a temp dir, the hashing embedder) as the
    process's vector store, so views and services search through the real pipeline."""
    memory = make_vector_memory(tmp_path / "chroma", collection_name="test_memory")
    monkeypatch.setattr("studio.memory.vector.get_vector_memory", lambda: memory)
    yield memory
    memory.close()
