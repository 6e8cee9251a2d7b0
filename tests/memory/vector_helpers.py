"""A deterministic stand-in embedder and a VectorMemory factory for the vector tests."""
from __future__ import annotations

import hashlib

import numpy as np

from studio.memory.chunking import whitespace_spans
from studio.memory.retrieval.lexical import tokenize


class HashingEmbedder:
    """Bag-of-words vectors by hashing tokens: texts sharing words are close. Counts calls."""

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

    def encode(self, texts, batch_size=32):
        self.encode_calls.append(list(texts))
        return np.stack([self._vector(text) for text in texts]) if texts else np.zeros((0, self.dimension))

    def token_spans(self, text):
        return whitespace_spans(text)
