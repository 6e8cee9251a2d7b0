"""The vector memories the retrieval tests query, one fixture per variant (empty unless named).

- `vm`: the hashing embedder (`embedder`), corpus versions in the database.
- `local_vm`: the hashing embedder, corpus versions in the process (no database).
- `model_vm`: the real packaged MiniLM model (`model_embedder`, loaded once per module; the tests
  that use it are marked `slow`).
"""

from __future__ import annotations

import pytest

from studio.memory.embeddings import embedding
from studio.memory.vector import LocalCorpusVersions, VectorMemory
from tests.fakes import HashingEmbedder


@pytest.fixture
def embedder():
    return HashingEmbedder()


@pytest.fixture
def vm(db, tmp_path, embedder):
    memory = VectorMemory(str(tmp_path / "chroma"), embedder=embedder)
    yield memory
    memory.close()


@pytest.fixture
def local_vm(tmp_path, embedder):
    memory = VectorMemory(str(tmp_path / "chroma"), embedder=embedder, versions=LocalCorpusVersions())
    yield memory
    memory.close()


@pytest.fixture(scope="module")
def model_embedder():
    embedder = embedding.get_embedder()
    assert embedder is not None, embedding.embedding_unavailable_reason()
    return embedder


@pytest.fixture
def model_vm(db, tmp_path, model_embedder):
    memory = VectorMemory(str(tmp_path / "chroma"))
    yield memory
    memory.close()
