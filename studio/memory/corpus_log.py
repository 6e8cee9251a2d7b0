"""The corpus versions and change log in the database: every process sees every other's writes.

`DatabaseCorpusVersions` is the `versions` object `VectorMemory` hands its corpus cache
(studio/memory/retrieval/corpus.py; that package imports no Django): per scope, one
VectorCorpusVersion row (a counter every write moves) and one VectorCorpusChange row per
version (the chunk ids the write added and removed). A cache that holds version v and reads
version V asks for the rows of v+1..V and fetches only the added chunks from the store
(retrieval/changes.py): O(change) per write, whichever process wrote.

Invariants: the counter moves and its change row is written in one transaction, so a reader
that sees version V finds the rows up to V. A bump that names no change writes no row (a gap:
the caches that straddle it list the scope's ids once). Rows older than `LOG_KEEP` versions are
pruned every `PRUNE_EVERY` versions.

Failure modes: the version read raises (database down) to the caller; a bump that cannot be
written after three tries raises VectorStoreError (two processes creating a scope's row at
once is retried).
"""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import F

from studio.memory.retrieval.changes import LOG_KEEP, CorpusChange
from studio.memory.retrieval.store import VectorStoreError

PRUNE_EVERY = 128


class DatabaseCorpusVersions:
    """Per-scope change counters and change log in the database (see the module docstring).

    Every write bumps its scope's counter; every search reads it (one indexed SELECT) and,
    when the number moved, reads the change rows since its cached version (one more).
    """

    # The models are imported per call: this module is imported with vector.py, which must
    # import before Django's apps are ready (settings-free tools, the retrieval benchmarks).

    def current(self, scope_id: str) -> int:
        from studio.memory.models import VectorCorpusVersion

        version = VectorCorpusVersion.objects.filter(scope_id=scope_id).values_list("version", flat=True).first()
        return int(version or 0)

    def bump(self, scope_id: str, change: CorpusChange | None = None) -> int:
        from studio.memory.models import VectorCorpusChange, VectorCorpusVersion

        for _attempt in range(3):
            try:
                with transaction.atomic():
                    updated = VectorCorpusVersion.objects.filter(scope_id=scope_id).update(version=F("version") + 1)
                    if not updated:
                        VectorCorpusVersion.objects.create(scope_id=scope_id, version=1)
                    version = self.current(scope_id)
                    if change is not None:
                        VectorCorpusChange.objects.create(
                            scope_id=scope_id, version=version, added=list(change.added), removed=list(change.removed)
                        )
                    if version % PRUNE_EVERY == 0:
                        VectorCorpusChange.objects.filter(scope_id=scope_id, version__lte=version - LOG_KEEP).delete()
                    return version
            except IntegrityError:  # two processes created the row at once: update again
                continue
        raise VectorStoreError(f"could not bump the corpus version of {scope_id!r}")

    def changes_since(self, scope_id: str, since: int, until: int) -> list[CorpusChange] | None:
        """Return the changes of versions since+1..until, or None when any is missing."""
        if until <= since or until - since > LOG_KEEP:
            return None if until != since else []
        from studio.memory.models import VectorCorpusChange

        rows = list(
            VectorCorpusChange.objects.filter(scope_id=scope_id, version__gt=since, version__lte=until)
            .order_by("version")
            .values_list("version", "added", "removed")
        )
        if [version for version, _added, _removed in rows] != list(range(since + 1, until + 1)):
            return None
        return [CorpusChange(tuple(added), tuple(removed)) for _version, added, removed in rows]
