"""Append-only storage shared by the corpora of one scope: a new turn's chunks are appended, nothing is copied.

A corpus (corpus.py) is one scope's chunks at one version. When the next version only appends
chunks after every one the cached corpus holds (a new turn), the new corpus is the old one's
storage with the new chunks appended in place: both read the same `ChunkTable`, each through
its own length (`Prefix`, `Positions`, a numpy prefix view), so the old corpus, which a query
in another thread may still be reading, sees exactly what it saw. Copying a 100,000-chunk
corpus's lists cost ~25 ms a write; appending costs the new chunks.

Invariants: the table only grows, and only the corpus at its tip appends to it (checked under
its lock: a corpus that is no longer the tip, or one that removed chunks, is copied into a new
table); rows below a corpus's length never change.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence

import numpy as np

LISTS = ("ids", "texts", "metadatas", "terms", "term_ids", "term_counts")
ARRAYS = {
    "turn_ids": np.int64,
    "chunk_types": object,
    "type_codes": np.int64,
    "doc_lens": np.int64,
    "chain_codes": np.int64,
}


class Prefix(Sequence):
    """The first `size` items of a list that may grow past them (read-only)."""

    __slots__ = ("_items", "_size")

    def __init__(self, items: list, size: int):
        self._items, self._size = items, size

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, index):
        if isinstance(index, slice):
            return self._items[slice(*index.indices(self._size))]
        if index < 0:
            index += self._size
        if not 0 <= index < self._size:
            raise IndexError("corpus index out of range")
        return self._items[index]

    def __iter__(self):
        return itertools.islice(self._items, self._size)

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and len(other) == self._size and all(a == b for a, b in zip(self, other))

    def __repr__(self) -> str:
        return f"Prefix({self._size} of {len(self._items)})"


def raw(sequence):
    """The list under a `Prefix` (for reads at positions known to be below its length), else the sequence."""
    return sequence._items if isinstance(sequence, Prefix) else sequence


class Positions:
    """Chunk id -> position, for the ids below `size` of a shared mapping."""

    __slots__ = ("_mapping", "_size")

    def __init__(self, mapping: dict[str, int], size: int):
        self._mapping, self._size = mapping, size

    def get(self, chunk_id, default=None):
        position = self._mapping.get(chunk_id)
        return position if position is not None and position < self._size else default

    def __contains__(self, chunk_id) -> bool:
        return self.get(chunk_id) is not None

    def __getitem__(self, chunk_id) -> int:
        position = self.get(chunk_id)
        if position is None:
            raise KeyError(chunk_id)
        return position

    def __len__(self) -> int:
        return self._size

    def __iter__(self):
        return (chunk_id for chunk_id, position in self._mapping.items() if position < self._size)

    def items(self):
        return ((chunk_id, position) for chunk_id, position in self._mapping.items() if position < self._size)


class ChunkTable:
    """The rows of one scope's corpora: lists, id positions and numpy columns, appended to in place."""

    def __init__(self) -> None:
        for name in LISTS:
            setattr(self, name, [])
        self.position: dict[str, int] = {}
        self._columns = {name: np.zeros(64, dtype=dtype) for name, dtype in ARRAYS.items()}
        self.length = 0
        self.lock = threading.Lock()

    def append(self, rows: dict[str, list]) -> int:
        """Append rows (a list per name of `LISTS` and `ARRAYS`); return the new length. Call with `lock` held
        when corpora share the table."""
        count = len(rows["ids"])
        for name in LISTS:
            getattr(self, name).extend(rows[name])
        for offset, chunk_id in enumerate(rows["ids"]):
            self.position[chunk_id] = self.length + offset
        need = self.length + count
        for name, dtype in ARRAYS.items():
            column = self._columns[name]
            if need > len(column):  # a new buffer: the views older corpora hold keep the old one
                grown = np.zeros(max(need, 2 * len(column)), dtype=dtype)
                grown[: self.length] = column[: self.length]
                self._columns[name] = column = grown
            column[self.length : need] = np.asarray(rows[name], dtype=dtype)
        self.length = need
        return need

    def fields(self, size: int) -> dict:
        """The corpus fields of the first `size` rows: list prefixes, positions, column views."""
        out = {name: Prefix(getattr(self, name), size) for name in LISTS}
        out["position"] = Positions(self.position, size)
        out.update({name: self._columns[name][:size] for name in ARRAYS})
        return out
