"""Exact nearest neighbours over a few chunks' stored vectors, where the ANN index is the wrong tool.

A query whose filter keeps a few hundred chunks of a long save (the Lore Book among 100,000
narrative chunks; the turns inside a named time) would make Chroma scan its metadata for the
rows the `where` matches, which costs as much as the save is long. Cosine distance over those
chunks' own vectors is exact and costs as much as the filter keeps: the vectors are fetched from
the store by id once per chunk and kept on the corpus (`Corpus.vectors`, carried to the next
corpus for the chunks it keeps; chunks never change in place). `RetrievalConfig.exact_search_max`
says how many chunks are "a few".
"""

from __future__ import annotations

import numpy as np


def exact_nearest(arm_input, view_indices: np.ndarray, depth: int) -> tuple[list[str], dict[str, float]]:
    """Return the `depth` chunks at `view_indices` nearest the query by cosine distance, computed here over
    their stored vectors (fetched from the store once per chunk and kept on the corpus), and their distances.

    Ties keep corpus order. A chunk the store no longer holds (deleted since the snapshot) is left out.
    """
    corpus = arm_input.corpus
    ids = arm_input.ids_at(view_indices)
    with corpus.lock:
        missing = [chunk_id for chunk_id in ids if chunk_id not in corpus.vectors]
    if missing:
        fetched = arm_input.store.get_embeddings(arm_input.scope_id, missing)
        with corpus.lock:
            corpus.vectors.update(fetched)
    with corpus.lock:
        pairs = [(chunk_id, corpus.vectors[chunk_id]) for chunk_id in ids if chunk_id in corpus.vectors]
    if not pairs:
        return [], {}
    matrix = np.stack([vector for _chunk_id, vector in pairs])
    query = np.asarray(arm_input.query_vector(), dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1) * (float(np.linalg.norm(query)) or 1.0)
    distances = 1.0 - (matrix @ query) / np.where(norms > 0, norms, 1.0)
    order = np.lexsort((np.arange(len(pairs)), distances))[:depth]
    kept = [pairs[i][0] for i in order]
    return kept, {chunk_id: float(distances[i]) for chunk_id, i in zip(kept, order)}
