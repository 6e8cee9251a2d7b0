"""The process-wide caches keyed by text, emptied in one call (benchmarks and tests start cold with it).

Each is a pure function of its text, so nothing ever needs invalidating; this is only for measuring:
token counts and word pieces (`embeddings/tokens.py`), word folding (`retrieval/lexical.py`), excerpt
term sets (`recall/excerpt.py`), the guard's terms (`continuity/checks.py`) and query embeddings
(`embeddings/embedding.py`).
"""

from __future__ import annotations


def text_caches_clear() -> None:
    """Empty every process-wide cache keyed by text."""
    from studio.memory.continuity import checks
    from studio.memory.embeddings import embedding, tokens
    from studio.memory.recall import excerpt
    from studio.memory.retrieval import lexical

    for cached in (tokens._count, lexical._fold_english_suffix, excerpt._term_set, checks.terms_of):
        cached.cache_clear()
    tokens._piece_counts.clear()
    embedding.query_cache_clear()
