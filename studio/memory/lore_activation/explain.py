"""The explanations of one evaluation: a record per entry, built lazily for untouched ones."""

from __future__ import annotations

from collections.abc import Mapping

from studio.memory.lore_activation.matcher import CompiledBook
from studio.memory.lore_activation.spec import Explanation


class Records:
    """The explanations an evaluation writes, created on first use (most entries need none)."""

    def __init__(self, book: CompiledBook):
        self.book = book
        self.records: dict[str, Explanation] = {}

    def __getitem__(self, entry_id: str) -> Explanation:
        record = self.records.get(entry_id)
        if record is None:
            spec = self.book.specs[self.book.by_id[entry_id]]
            record = self.records[entry_id] = Explanation(entry_id, spec.title)
        return record


class Explanations(Mapping):
    """Entry id -> Explanation for EVERY entry of the book, in book order.

    Entries the evaluation decided about carry their record; the others (no key in the
    buffer, disabled, ...) get theirs built on first access, so a turn does not pay for
    5,000 records nobody reads.
    """

    def __init__(self, book: CompiledBook, records: dict[str, Explanation], untouched):
        self._book = book
        self._records = records
        self._untouched = untouched

    def __getitem__(self, entry_id: str) -> Explanation:
        record = self._records.get(entry_id)
        if record is None:
            index = self._book.by_id[entry_id]  # KeyError for an id not in the book
            record = self._records[entry_id] = self._untouched(index)
        return record

    def __iter__(self):
        return (spec.entry_id for spec in self._book.specs)

    def __len__(self) -> int:
        return len(self._book.specs)

    @property
    def specs(self):
        """The book's entries (LoreSpec), in book order."""
        return self._book.specs
