"""What ties the vector memory (vector.py) to this project: the store, reranker and pool the
settings choose (the corpus versions kept in the database are corpus_log.py's).

vector.py builds its process-wide instance from `vector_memory_options()` and re-exports these
names; this module imports nothing of it (no import cycle).
"""

from __future__ import annotations

from typing import Any

from studio.memory.retrieval.config import RetrievalConfig
from studio.memory.retrieval.store import VectorStoreError


# --- From settings ---------------------------------------------------------------------------


def get_configured_reranker():
    """Return a CrossEncoderReranker for settings.AXIOM_RERANKER_MODEL, or None when unset."""
    from django.conf import settings

    name = getattr(settings, "AXIOM_RERANKER_MODEL", "") or ""
    if not name:
        return None
    from studio.memory.retrieval.reranker import CrossEncoderReranker

    return CrossEncoderReranker(model_name=name)


def vector_memory_options() -> dict[str, Any]:
    """Return the VectorMemory arguments the settings give (read now, not at import).

    settings.CHROMA_HOST set: an HttpClient to that Chroma server (CHROMA_PORT), which any
    number of processes may share. Otherwise the embedded store at settings.CHROMA_PATH,
    locked to this process when opened: a second process gets VectorStoreLockedError at once.
    """
    from django.conf import settings

    options: dict[str, Any] = {
        "persist_dir": None,
        "reranker": get_configured_reranker(),
        "rerank_pool": int(getattr(settings, "AXIOM_RERANK_POOL", RetrievalConfig.rerank_pool)),
    }
    host = (getattr(settings, "CHROMA_HOST", "") or "").strip()
    if not host:
        return {**options, "persist_dir": settings.CHROMA_PATH}
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
    return {**options, "client": client}
