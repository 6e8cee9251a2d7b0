"""A real VectorMemory (embedded Chroma in a temp dir) with a small deterministic embedder.

The inspector's tests need the real search pipeline (arms, fusion, explain records, link
expansion, why-not) but not the MiniLM weights: `HashEmbedder` maps each word to a fixed
random direction, so texts sharing words are near each other. `vector_memory` patches
`studio.memory.vector.get_vector_memory` for the test, so views and services use it.
"""
from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest

DIMENSIONS = 64
_WORD = re.compile(r"\w+")


class HashEmbedder:
    max_tokens = 256

    def _word_vector(self, word: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.md5(word.encode("utf-8")).digest()[:4], "little")
        return np.random.default_rng(seed).standard_normal(DIMENSIONS)

    def encode(self, texts, batch_size: int = 32) -> np.ndarray:
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.casefold()):
                out[row] += self._word_vector(word)
            norm = np.linalg.norm(out[row])
            out[row] = out[row] / norm if norm else np.ones(DIMENSIONS) / np.sqrt(DIMENSIONS)
        return out

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in _WORD.finditer(text)]


def make_vector_memory(path):
    from studio.memory.vector import LocalCorpusVersions, VectorMemory

    return VectorMemory(str(path), embedder=HashEmbedder(), versions=LocalCorpusVersions(), collection_name="test_memory")


@pytest.fixture
def vector_memory(tmp_path, monkeypatch):
    from studio.memory import vector

    memory = make_vector_memory(tmp_path / "chroma")
    monkeypatch.setattr(vector, "get_vector_memory", lambda: memory)
    yield memory
    memory.close()
