"""A real VectorMemory on an in-memory Chroma with a small deterministic embedder.

The hashing embedder stands in for MiniLM so the API tests run without loading a model;
the store, the filters and the fusion are the real ones.
"""
from __future__ import annotations

import re
import uuid
import zlib

import numpy as np

DIMENSIONS = 256
WORD = re.compile(r"\w+")


class HashingEmbedder:
    """Bag of words hashed into 256 dimensions, L2-normalised."""

    max_tokens = 254

    def encode(self, texts, batch_size: int = 32) -> np.ndarray:
        rows = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in WORD.findall(text.lower()):
                rows[i, zlib.crc32(word.encode()) % DIMENSIONS] += 1.0
            norm = np.linalg.norm(rows[i])
            rows[i] = rows[i] / norm if norm else rows[i]
            if not norm:
                rows[i, 0] = 1.0
        return rows

    def token_spans(self, text: str):
        return [m.span() for m in WORD.finditer(text)]


def make_vector_memory(embedder=HashingEmbedder()):
    import chromadb
    from chromadb.config import Settings

    from studio.memory.vector import LocalCorpusVersions, VectorMemory

    client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
    return VectorMemory(
        None,
        client=client,
        embedder=embedder,
        versions=LocalCorpusVersions(),
        collection_name=f"test_{uuid.uuid4().hex[:12]}",
    )
