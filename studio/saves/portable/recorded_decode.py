"""Reading a save file's recorded values: `RecordReading.decode`, the inverse of recorded_encode.py.

Each value is rebuilt against the previous item's at the same place and the tables the
section has given so far (recorded_tables.py), in file order. `decode` raises ValueError for a
marker that does not fit (an unknown key, a number naming no table entry, a row without its
columns, a 32-bit float that is not one), so an import refuses a file instead of guessing.
The format is described in recorded.py.
"""

from __future__ import annotations

import math
from typing import Any

from studio.saves.narrator.snapshots import delta_decode, delta_problem
from studio.saves.portable.recorded_items import (
    apply,
    as_list,
    canonical,
    float32,
    get_path,
    items_by_layer,
    predicted,
    refuse,
    render_template,
    set_path,
)
from studio.saves.portable.recorded_tables import (
    ADDED,
    COLUMNS,
    DELTA,
    FLOAT32,
    HEADER,
    ITEM_PLACE,
    ITEMS,
    NEW,
    POSITIONAL,
    REF,
    REMOVED,
    SAME,
    STRINGS,
    TEMPLATES,
    UPDATE,
    VERBATIM,
    RecordTables,
)


class RecordReading(RecordTables):
    """The reading half of `RecordCodec`: `decode` a value against the previous item's at its place."""

    def decode(self, value: Any, previous: Any, reference: str, place: tuple = ()) -> Any:
        if isinstance(value, dict):
            keys = set(value)
            if keys == {SAME}:
                if previous is None:
                    raise ValueError("refers to the previous item's value, which does not exist")
                return previous
            if keys == {VERBATIM}:
                return value[VERBATIM]
            if keys == {DELTA}:
                problem = delta_problem(value[DELTA], len(reference))
                if problem:
                    raise ValueError(f"a delta {problem}")
                return delta_decode(value[DELTA], reference)
            if keys == {STRINGS}:
                return [self._string_in(x) for x in as_list(value[STRINGS], STRINGS)]
            if keys == {ITEMS}:
                return self._decode_items(
                    value[ITEMS], previous if isinstance(previous, list) else [], reference, place
                )
            return self._decode_dict(value, previous if isinstance(previous, dict) else None, reference, place)
        if isinstance(value, list):
            if value and all(
                isinstance(x, str) for x in value
            ):  # a list of strings, none known before: each joins the table
                return [self._string_in(x) for x in value]
            before = previous if isinstance(previous, list) else []
            return [
                self.decode(x, before[i] if i < len(before) else None, reference, place) for i, x in enumerate(value)
            ]
        return value

    def _decode_dict(self, value: dict, before: dict | None, reference: str, place: tuple) -> dict:
        markers = {REMOVED, ADDED} if before is not None else set()
        unknown = sorted(key for key in value if key.startswith("$") and key not in markers)
        if unknown:
            raise ValueError(f"has keys {unknown} that are no marker here")
        if before is None:
            out = {
                key: self.decode(item, self.memory.get((place, key)), reference, place + (key,))
                for key, item in sorted(value.items())
            }
        else:
            out = dict(before)
            for name in as_list(value.get(REMOVED, []), REMOVED):
                key = self._string_in(name)
                if key not in out:
                    raise ValueError(f"removes the key {key!r}, which the previous value does not have")
                del out[key]
            for entry in as_list(value.get(ADDED, []), ADDED):
                if not isinstance(entry, list) or len(entry) not in (1, 2):
                    raise ValueError("an added key ($+) is [key] or [key, value]")
                key = self._string_in(entry[0])
                if key in before or key.startswith("$"):
                    raise ValueError(f"adds the key {key!r}, which the previous value has (or a marker)")
                if len(entry) == 1 and (place, key) not in self.memory:
                    raise ValueError(f"adds the key {key!r} with its last value, and it has none")
                out[key] = (
                    self.memory[(place, key)]
                    if len(entry) == 1
                    else self.decode(entry[1], self.memory.get((place, key)), reference, place + (key,))
                )
            for key in sorted(k for k in value if not k.startswith("$")):
                if key not in before:
                    raise ValueError(f"changes the key {key!r}, which the previous value does not have")
                out[key] = self.decode(value[key], before[key], reference, place + (key,))
        self._remember(place, out)
        return out

    def _decode_items(self, entries: Any, before: list, reference: str, place: tuple) -> list:
        by_layer = items_by_layer(before)
        counters: dict[str, int] = {}
        header: dict | None = None
        out: list = []
        for entry in as_list(entries, ITEMS):
            if isinstance(entry, dict) and (COLUMNS in entry or set(entry) == {HEADER}):
                header = self._header_in(entry)
                continue
            if type(entry) is int:
                item = self.last[self._ref_in(entry)]
            elif isinstance(entry, dict) and set(entry) == {REF, UPDATE}:
                key = self._ref_in(entry[REF])
                item = self.decode(entry[UPDATE], self.last[key], reference, place + (ITEM_PLACE,))
                if not isinstance(item, dict) or canonical(item.get("ref")) != key:
                    raise ValueError("an item written against its last version ($r) must keep its ref")
                self.last[key] = item
            else:
                item = self._decode_entry(entry, out, by_layer, counters, header, reference, place)
            counters[canonical(item.get("layer"))] = counters.get(canonical(item.get("layer")), -1) + 1
            out.append(item)
        return out

    def _decode_entry(
        self, entry, out: list, by_layer: dict, counters: dict, header, reference: str, place: tuple
    ) -> dict:
        def position(layer) -> dict | None:
            neighbours = by_layer.get(canonical(layer), [])
            index = counters.get(canonical(layer), -1) + 1
            return neighbours[index] if index < len(neighbours) else None

        if isinstance(entry, dict) and NEW in entry and set(entry) <= {NEW, TEMPLATES}:
            made = entry.get(TEMPLATES, {})
            if not isinstance(made, dict):
                raise ValueError("the templates ($t) of a new item must be an object")
            templates = {path: self._template_in(made[path]) for path in sorted(made)}
            previous = out[-1] if out else None
            base = predicted(previous, position(previous.get("layer")) if previous else None, header)
            item = self.decode(entry[NEW], base, reference, place + (ITEM_PLACE,))
            if not isinstance(item, dict) or "ref" not in item:
                raise ValueError("a new item ($n) must be an object with a ref")
            item, copied = dict(item), set()
            for path, template in templates.items():
                set_path(item, path, render_template(template, item), copied)
            self._learn_ref(item)
            return item
        if isinstance(entry, list) and entry:
            if header is None or len(entry) != 1 + len(header["columns"]):
                raise ValueError("a row must follow its columns ($c) and give one value for each")
            key = self._ref_in(entry[0])
            last = self.last[key]
            values = []
            for path, value in zip(header["columns"], entry[1:]):
                if path in header["float32"]:
                    if type(value) is not float or not math.isfinite(value):
                        raise ValueError(f"{path} ($f) must be a decimal number")
                    try:
                        values.append(float32(value))
                    except OverflowError:
                        raise ValueError(f"{path} ($f) is too large for a 32-bit float") from None
                else:
                    values.append(
                        self.decode(value, get_path(last, path), reference, place + (ITEM_PLACE, *path.split(".")))
                    )
            item = apply(last, position(last.get("layer")), header, values)
            self.last[key] = item
            return item
        raise ValueError("an item entry must be a number, a row, {$n}, {$r, $u}, {$c} or {$h}")

    def _header_in(self, entry: dict) -> dict:
        if set(entry) == {HEADER}:
            return (
                self._in(entry[HEADER], self.headers, self.header_numbers, "columns", key=canonical)
                if type(entry[HEADER]) is int
                else refuse("columns ($h) must name columns given before")
            )
        if set(entry) - {COLUMNS, FLOAT32, POSITIONAL, TEMPLATES}:
            raise ValueError("columns ($c) take only $c, $f, $p and $t")
        columns, floats = as_list(entry[COLUMNS], COLUMNS), as_list(entry.get(FLOAT32, []), FLOAT32)
        positional, made = as_list(entry.get(POSITIONAL, []), POSITIONAL), entry.get(TEMPLATES, {})
        if not isinstance(made, dict):
            raise ValueError("templates ($t) must be an object")
        for path in [*columns, *floats, *positional, *made]:
            if (
                not isinstance(path, str)
                or not path
                or path.count(".") > 1
                or path.startswith(("$", "."))
                or path.endswith(".")
            ):
                raise ValueError(f"{path!r} is not a path (key or key.subkey)")
        if not set(floats) <= set(columns):
            raise ValueError("every $f path must be one of the columns ($c)")
        header = {
            "columns": columns,
            "float32": floats,
            "positional": positional,
            "templates": {path: self._template_in(made[path]) for path in sorted(made)},
        }
        self.header_numbers.setdefault(canonical(header), len(self.headers))
        self.headers.append(header)
        return header
