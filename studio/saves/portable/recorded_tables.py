"""The tables a save file's recorded-values codec (`portable/recorded.py`) keeps, and its markers.

`RecordTables` holds what a section has given so far, in file order: the last version of
every context item by its ref, the strings, templates and column headers (each written once,
then by its number), and the last value of every key at each dict place. The writer
(`recorded_encode.RecordWriting`) and the reader (`recorded_decode.RecordReading`) fill the
same tables the same way, so a number one writes is the value the other reads. The markers
(`$s`, `$d`, `$items`, ...) are the format's, described in recorded.py.
"""

from __future__ import annotations

from typing import Any

from studio.saves.portable.recorded_items import canonical, check_template

SAME, DELTA, VERBATIM, STRINGS, REMOVED, ADDED = "$s", "$d", "$v", "$I", "$-", "$+"
ITEMS, NEW, REF, UPDATE, HEADER = "$items", "$n", "$r", "$u", "$h"
COLUMNS, FLOAT32, POSITIONAL, TEMPLATES = "$c", "$f", "$p", "$t"
ITEM_PLACE = "[item]"  # the place (for the remembered values) of a context item's own keys


class RecordTables:
    """What one section's codec has read or written so far (a new codec: empty tables)."""

    def __init__(self):
        self.refs: list[str] = []
        self.ref_numbers: dict[str, int] = {}
        self.last: dict[str, dict] = {}
        self.strings: list[str] = []
        self.string_numbers: dict[str, int] = {}
        self.templates: list[list] = []
        self.template_numbers: dict[str, int] = {}
        self.headers: list[dict] = []
        self.header_numbers: dict[str, int] = {}
        self.memory: dict[tuple, Any] = {}

    @staticmethod
    def reset_at(encoded: Any) -> bool:
        """Whether an item's value was written whole (`VerifiedWriter`): its reader starts again empty."""
        return isinstance(encoded, dict) and set(encoded) == {VERBATIM}

    # -- the tables: written once, then by number ---------------------------------------------

    def _out(self, value: Any, table: list, numbers: dict, key: str) -> Any:
        number = numbers.get(key)
        if number is None:
            numbers[key] = len(table)
            table.append(value)
            return value
        return number

    def _in(self, value: Any, table: list, numbers: dict, what: str, *, key=None):
        if type(value) is int:
            if 0 <= value < len(table):
                return table[value]
            raise ValueError(f"names {what} {value} of the file's table, which does not exist")
        if key(value) not in numbers:
            numbers[key(value)] = len(table)
            table.append(value)
        return value

    def _string_out(self, text: str):
        return self._out(text, self.strings, self.string_numbers, text)

    def _string_in(self, value: Any) -> str:
        if not isinstance(value, (str, int)) or isinstance(value, bool):
            raise ValueError(f"{value!r} is neither a string nor the number of one")
        return self._in(value, self.strings, self.string_numbers, "string", key=str)

    def _template_out(self, parts: list):
        return self._out(parts, self.templates, self.template_numbers, canonical(parts))

    def _template_in(self, value: Any) -> list:
        if type(value) is not int:
            check_template(value)
        return self._in(value, self.templates, self.template_numbers, "template", key=canonical)

    def _learn_ref(self, item: dict) -> None:
        key = canonical(item["ref"])
        self.ref_numbers.setdefault(key, len(self.refs))
        if self.ref_numbers[key] == len(self.refs):
            self.refs.append(key)
        ref = item["ref"]
        for value in (
            [ref[name] for name in sorted(ref)] if isinstance(ref, dict) else [ref]
        ):  # not the database's key order
            if isinstance(value, str) and value not in self.string_numbers:
                self.string_numbers[value] = len(self.strings)
                self.strings.append(value)
        self.last[key] = item

    def _ref_in(self, value: Any) -> str:
        if type(value) is int and 0 <= value < len(self.refs):
            return self.refs[value]
        raise ValueError(f"names item {value!r} of the file's table of items, which does not exist")

    def _remember(self, place: tuple, value: dict) -> None:
        for key, item in value.items():
            self.memory[(place, key)] = item
