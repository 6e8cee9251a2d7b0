"""What ties the vector memory (vector.py) to this project: the corpus versions kept in the
database, and the process-wide instance built from settings.

Callers import these names from `studio.memory.vector`, which re-exports them (tests replace
`studio.memory.vector.get_vector_memory`). `VectorMemory` is imported where the instance is
built, not at the top: vector.py imports this module for its default corpus versions.
"""
from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from studio.memory.retrieval.config import RetrievalConfig
from studio.memory.retrieval.store import VectorStoreError

if TYPE_CHECKING:
    from studio.memory.vector import VectorMemory


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


# --- Process-wide instance -----------------------------------------------------------------

_instance: VectorMemory | None = None
_instance_pid: int | None = None
_instance_lock = threading.Lock()


def get_configured_reranker():
    """Return a CrossEncoderReranker for settings.AXIOM_RERANKER_MODEL, or None when unset."""
    from django.conf import settings

    name = getattr(settings, "AXIOM_RERANKER_MODEL", "") or ""
    if not name:
        return None
    from studio.memory.retrieval.reranker import CrossEncoderReranker

    return CrossEncoderReranker(model_name=name)


def build_vector_memory() -> VectorMemory:
    """Build a VectorMemory from settings (read now, not at import).

    settings.CHROMA_HOST set: an HttpClient to that Chroma server (CHROMA_PORT), which any
    number of processes may share. Otherwise the embedded store at settings.CHROMA_PATH,
    locked to this process: a second process gets VectorStoreLockedError at once.
    """
    from django.conf import settings

    from studio.memory.vector import VectorMemory  # the facade imports this module

    rerank_pool = int(getattr(settings, "AXIOM_RERANK_POOL", RetrievalConfig.rerank_pool))
    reranker = get_configured_reranker()
    host = (getattr(settings, "CHROMA_HOST", "") or "").strip()
    if host:
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
        return VectorMemory(None, reranker, client=client, rerank_pool=rerank_pool)
    return VectorMemory(settings.CHROMA_PATH, reranker, rerank_pool=rerank_pool)


def get_vector_memory() -> VectorMemory:
    """Return this process's VectorMemory, building it from settings on first use."""
    global _instance, _instance_pid
    with _instance_lock:
        if _instance is not None and _instance_pid == os.getpid():
            return _instance
        # None yet, or inherited through fork (it belongs to the parent process).
        _instance = build_vector_memory()
        _instance_pid = os.getpid()
        return _instance


def reset_vector_memory() -> None:
    """Forget the process-wide VectorMemory and release its store lock (for tests)."""
    global _instance, _instance_pid
    with _instance_lock:
        if _instance is not None and _instance_pid == os.getpid():
            _instance.close()
        _instance = None
        _instance_pid = None
