"""The change log of a scope's chunks: what each corpus version added and removed.

A cached corpus is valid for one corpus version (corpus.py). When the version moved, the
cache asks the log what happened since its version: the ids each change added and the ids it
removed. With every change since then in the log, the cache fetches only the added chunks
from the store and drops the removed ones (`CorpusCache.read`): a turn's write costs the
turn's chunks, never a listing of the save's ids. Without them (a write that did not say
what it changed, `note_external_write`; a log pruned past the cached version; a versions
object with no log) the cache falls back to listing the scope's ids.

The versions object is any object with `current(scope)` and `bump(scope)`; one that also
has `changes_since(scope, since, until)` and takes `bump(scope, change=...)` keeps a log:
`LocalCorpusVersions` here (one process), `studio.memory.corpus_log.DatabaseCorpusVersions`
in the studio (rows in the database, so every process sees every other's changes).

Invariants:
- A change is recorded with the version its bump moved the scope to, in the same step as the
  bump (the database one: one transaction), after the store accepted the write; so a reader
  that sees version V finds every change up to V.
- `changes_since` answers all of (since, until] or nothing (None): a gap means "unknown".
- Chunk ids are never reused (a new chunk is a new UUID), so an id added and removed within
  one window cancels out.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass

LOG_KEEP = 1024  # changes kept per scope; a cache older than that lists the scope's ids once


@dataclass(frozen=True)
class CorpusChange:
    """One write to a scope: the chunk ids it added and the ids it removed."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()


def supports_log(versions) -> bool:
    """True when `versions` keeps a change log (`changes_since`)."""
    return callable(getattr(versions, "changes_since", None))


def bump(versions, scope_id: str, *, added=(), removed=()) -> int:
    """Move the scope's version, recording what changed when the versions object keeps a log.

    Nothing named (neither `added` nor `removed`) records no change: "unknown", so caches list
    the scope's ids.
    """
    if supports_log(versions) and (added or removed):
        return versions.bump(scope_id, change=CorpusChange(tuple(added), tuple(removed)))
    return versions.bump(scope_id)


def fold(changes: list[CorpusChange], known: dict[str, int]) -> tuple[list[str], set[str]]:
    """Return (the ids added and still present, in write order; the `known` ids removed).

    `known` is the cached corpus's id -> position; an id added then removed in the window
    cancels out, an id the cache never held is not "removed".
    """
    added: dict[str, None] = {}
    removed: set[str] = set()
    for change in changes:
        for chunk_id in change.added:
            if chunk_id not in known:
                added[chunk_id] = None
        for chunk_id in change.removed:
            if chunk_id in added:
                del added[chunk_id]
            elif chunk_id in known:
                removed.add(chunk_id)
    return list(added), removed


class LocalCorpusVersions:
    """In-process counters and change log, for use without a database (one process only)."""

    def __init__(self) -> None:
        self._versions: dict[str, int] = {}
        self._log: dict[str, deque] = {}
        self._lock = threading.Lock()

    def current(self, scope_id: str) -> int:
        return self._versions.get(scope_id, 0)

    def bump(self, scope_id: str, change: CorpusChange | None = None) -> int:
        with self._lock:
            version = self._versions[scope_id] = self._versions.get(scope_id, 0) + 1
            log = self._log.setdefault(scope_id, deque(maxlen=LOG_KEEP))
            if change is not None:
                log.append((version, change))
            else:
                log.clear()  # unknown: a reader before this version lists the scope's ids
            return version

    def changes_since(self, scope_id: str, since: int, until: int) -> list[CorpusChange] | None:
        with self._lock:
            entries = [entry for entry in self._log.get(scope_id, ()) if since < entry[0] <= until]
        if [version for version, _change in entries] != list(range(since + 1, until + 1)):
            return None
        return [change for _version, change in entries]
