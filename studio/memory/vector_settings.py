"""What ties the vector memory (vector.py) to this project: the corpus versions kept in the
database, and the store, reranker and pool the settings choose.

vector.py builds its process-wide instance from `vector_memory_options()` and re-exports these
names; this module imports nothing of it (no import cycle).
"""
from __future__ import annotations

from typing import Any

from studio.memory.retrieval.config import RetrievalConfig
from studio.memory.retrieval.store import VectorStoreError


class DatabaseCorpusVersions:
    """Per-scope change counters in the database (VectorCorpusVersion rows); the retrieval
    package's caches take any `versions` object and know no database.

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
