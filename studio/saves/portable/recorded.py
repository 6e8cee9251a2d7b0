"""How a save file writes what play recorded (a snapshot's memory context, a recorded query): each
value against what the file already holds, so a long chat's file grows with what is new.

Version 2 of the `narrator_snapshots` and `recorded_queries` sections. One `RecordCodec` reads
(or writes) a whole section in file order and keeps, across its items, tables the file builds
as it goes: the **last version of every context item by its `ref`** (the same chunk, turn or
entry, in whatever snapshot it last was), **strings** (each string of a ref, each string a
list of strings or a dict's added or removed keys wrote out), **templates** and **columns**
(below), and for each dict place (its keys from the root, list positions left out) the **last
value of every key** there. A value is written against the previous item's at the same place:

- a dict: only what changed (`{}`: nothing), `"$-"` the keys removed, `"$+"` those added, each
  `[key]` (its last value at this place) or `[key, value]`; a key is a string or the number of
  one in the table; a dict whose own keys start with `$`: `{"$v": value}`, as it is;
- a list or string equal to the previous one: `{"$s": 1}`; a list of strings: `{"$I": [...]}`,
  each a number in the string table or the string (which joins it), or when none is in the
  table the list as it is (each joins it); a long string copied from
  the prompts or the chat: `{"$d": ops}` (`narrator/snapshots.delta_encode`);
- a list of context items (dicts with a `ref`): `{"$items": [entries]}`, each
  - a number: the item of that ref, as its last version;
  - `[n, value, ...]`: the item of ref n, its last version with the values of the columns;
  - `{"$c": [paths], "$f": [...], "$p": [...], "$t": {...}}` (or `{"$h": n}`, columns given
    before): the columns of the rows after it. `$c` the paths (`key` or `key.subkey`) a row
    gives, `$f` those given as the shortest decimal of a 32-bit float (a vector distance), `$p`
    those whose value is the one the previous snapshot's item at the same place in the same
    layer had (a rank, the score it gives), `$t` the strings made from the item's own values;
  - `{"$n": dict, "$t": {...}}`: a new ref, written against the entry before it (with the
    `$p` values of the previous snapshot's item at the next place of that entry's layer), its
    strings at the `$t` paths made by templates;
  - `{"$r": n, "$u": dict}`: the item of ref n, written against its last version.
  A template (a list of literal strings and `[path]` or `[path, decimals]`, or the number of
  one the file gave before) makes a string from the item's own numbers and strings: `"rank 3
  (distance 0.125)"` from `why.final_rank` and `why.semantic_distance`. So a cut candidate
  whose rank and score moved costs a few numbers; its text, reason and cut are in the file
  once, with the item its ref points to.

Every row is checked to rebuild its item before it is written, and `VerifiedWriter` reads
every value back with a second codec as an import will; a value that would not come back
exactly is written whole (`{"$v": ...}`) and both start again with empty tables.
`decode` raises ValueError for a marker that does not fit.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from studio.saves.narrator.snapshots import MIN_DELTA_STRING, Reference, delta_decode, delta_encode, delta_problem
from studio.saves.portable.recorded_items import (
    apply,
    as_list,
    canonical,
    check_template,
    float32,
    get_path,
    has_path,
    item_leaves,
    items_by_layer,
    make_template,
    positions,
    predicted,
    refuse,
    render_template,
    renders,
    same,
    set_path,
    short_float32,
)

SAME, DELTA, VERBATIM, STRINGS, REMOVED, ADDED = "$s", "$d", "$v", "$I", "$-", "$+"
ITEMS, NEW, REF, UPDATE, HEADER = "$items", "$n", "$r", "$u", "$h"
COLUMNS, FLOAT32, POSITIONAL, TEMPLATES = "$c", "$f", "$p", "$t"
ITEM_PLACE = "[item]"  # the place (for the remembered values) of a context item's own keys

logger = logging.getLogger(__name__)


# -- the codec -----------------------------------------------------------------------------


class RecordCodec:
    """Writes (`encode`) or reads (`decode`) the recorded values of one section, in file order."""

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

    # -- writing ----------------------------------------------------------------------------

    def encode(self, value: Any, previous: Any, reference: Reference, place: tuple = ()) -> Any:
        if isinstance(value, dict):
            if any(key.startswith("$") for key in value):
                return {VERBATIM: value}
            return self._encode_dict(value, previous if isinstance(previous, dict) else None, reference, place)
        if isinstance(value, (list, str)) and previous is not None and same(value, previous):
            return {SAME: 1}
        if isinstance(value, list):
            if value and all(
                isinstance(x, dict) and "ref" in x and not any(k.startswith("$") for k in x) for x in value
            ):
                return {
                    ITEMS: self._encode_items(value, previous if isinstance(previous, list) else [], reference, place)
                }
            if value and all(isinstance(x, str) for x in value):
                if any(x in self.string_numbers for x in value):
                    return {STRINGS: [self._string_out(x) for x in value]}
                for x in value:  # none known: as it is, and each joins the table
                    self._string_out(x)
                return list(value)
            before = previous if isinstance(previous, list) else []
            return [
                self.encode(x, before[i] if i < len(before) else None, reference, place) for i, x in enumerate(value)
            ]
        if isinstance(value, str) and len(value) >= MIN_DELTA_STRING:
            ops = delta_encode(value, reference)
            if sum(len(op) + 4 if isinstance(op, str) else 14 for op in ops) < len(value):
                return {DELTA: ops}
        return value

    def _encode_dict(self, value: dict, before: dict | None, reference: Reference, place: tuple) -> dict:
        if before is None:
            out = {
                key: self.encode(item, self.memory.get((place, key)), reference, place + (key,))
                for key, item in sorted(value.items())
            }
        else:
            out = {}
            removed = [self._string_out(key) for key in sorted(before) if key not in value]
            added = []
            for key in sorted(set(value) - set(before)):
                remembered = self.memory.get((place, key))
                if (place, key) in self.memory and same(value[key], remembered):
                    added.append([self._string_out(key)])
                else:
                    added.append(
                        [self._string_out(key), self.encode(value[key], remembered, reference, place + (key,))]
                    )
            for key in sorted(value):
                if key in before and not same(value[key], before[key]):
                    out[key] = self.encode(value[key], before[key], reference, place + (key,))
            if removed:
                out[REMOVED] = removed
            if added:
                out[ADDED] = added
        self._remember(place, value)
        return out

    def _encode_items(self, items: list[dict], before: list, reference: Reference, place: tuple) -> list:
        plans = list(zip(items, [canonical(item["ref"]) for item in items], positions(items, before)))
        by_layer = items_by_layer(before)
        counters: dict[str, int] = {}
        entries: list = []
        header: dict | None = None
        previous = None
        for index, (item, key, _) in enumerate(plans):
            last = self.last.get(key)
            # The previous snapshot's item at this place in the layer of its last version (a new item: of the entry before).
            layer = canonical((last or previous or {}).get("layer")) if (last or previous) else None
            neighbours = by_layer.get(layer, [])
            at = counters.get(layer, -1) + 1
            position = neighbours[at] if at < len(neighbours) else None
            if last is None:
                entries.append(self._new_entry(item, previous, position, header, reference, place))
                self._learn_ref(item)
            elif same(item, last):
                entries.append(self.ref_numbers[key])
            else:
                fits = header is not None and self._fits(item, last, position, header)
                if not fits:
                    # New columns when the next changed item fits them too; a lone change is written against its last version.
                    shape = self._shape(item, last, position, header)
                    later = next(
                        (
                            (i, p)
                            for i, k, p in plans[index + 1 :]
                            if k in self.last and k != key and not same(i, self.last[k])
                        ),
                        None,
                    )
                    if (
                        shape is not None
                        and self._fits(item, last, position, shape)
                        and later is not None
                        and self._fits(later[0], self.last[canonical(later[0]["ref"])], later[1], shape)
                    ):
                        entries.append(self._header_out(shape))
                        header, fits = shape, True
                if fits:
                    entries.append(self._row(item, last, header, reference, place))
                else:
                    entries.append(
                        {REF: self.ref_numbers[key], UPDATE: self.encode(item, last, reference, place + (ITEM_PLACE,))}
                    )
                self.last[key] = item
            previous = item
            counters[canonical(item.get("layer"))] = counters.get(canonical(item.get("layer")), -1) + 1
        return entries

    def _new_entry(
        self, item: dict, previous: dict | None, position, header, reference: Reference, place: tuple
    ) -> dict:
        """A new ref's item against the entry before it, with its header's positional values, and templates."""
        base = predicted(previous, position, header)
        made: dict[str, list] = {}
        if base is not None:
            for path, value in item_leaves(item):
                if isinstance(value, str) and isinstance(get_path(base, path), str) and value != get_path(base, path):
                    template = next((t for t in reversed(self.templates[-16:]) if renders(t, item, value)), None)
                    made_here = template or make_template(value, item, path)
                    if made_here is not None:
                        made[path] = made_here
        while True:  # what the reader does: the patch, then each template in path order on what it has so far
            written, copied = dict(item), set()
            for path in made:  # the patch leaves them as they are in the base; the templates make them
                set_path(written, path, get_path(base, path), copied)
            rebuilt, copied, wrong = dict(written), set(), []
            for path in sorted(made):
                if renders(made[path], rebuilt, get_path(item, path)):
                    set_path(rebuilt, path, get_path(item, path), copied)
                else:
                    wrong.append(path)
            if not wrong:
                break
            for path in wrong:
                del made[path]
        entry: dict = {}
        if made:
            entry[TEMPLATES] = {path: self._template_out(made[path]) for path in sorted(made)}
        entry[NEW] = self.encode(written, base, reference, place + (ITEM_PLACE,))
        return entry

    def _shape(self, item: dict, last: dict, position: dict | None, header: dict | None) -> dict | None:
        """The columns a row of `item` needs against its last version, or None (it cannot be a row)."""
        if any(key not in item for key in last):
            return None
        paths = []
        for key, value in item.items():
            if "." in key:
                return None
            if key in last and same(value, last[key]):
                continue
            if isinstance(value, dict) and isinstance(last.get(key), dict):
                if any(sub not in value for sub in last[key]) or any("." in sub for sub in value):
                    return None
                paths.extend(
                    f"{key}.{sub}" for sub in value if sub not in last[key] or not same(value[sub], last[key][sub])
                )
            else:
                paths.append(key)
        shape: dict = {"columns": [], "float32": [], "positional": [], "templates": {}}
        for path in sorted(paths):
            value = get_path(item, path)
            if position is not None and has_path(position, path) and same(get_path(position, path), value):
                shape["positional"].append(path)
                continue
            if isinstance(value, str):
                template = (header or {}).get("templates", {}).get(path)
                if not (template and renders(template, item, value)):
                    template = make_template(value, item, path)
                if template is not None:
                    shape["templates"][path] = template
                    continue
            shape["columns"].append(path)
            if short_float32(value) is not None:
                shape["float32"].append(path)
        return shape

    def _fits(self, item: dict, last: dict, position: dict | None, header: dict) -> bool:
        """Whether a row under `header` rebuilds `item` from its last version (no side effect)."""
        values = []
        for path in header["columns"]:
            if not has_path(item, path):
                return False
            value = get_path(item, path)
            if path in header["float32"]:
                short = short_float32(value)
                if short is None:
                    return False
                value = float32(short)
            values.append(value)
        try:
            return same(apply(last, position, header, values), item)
        except ValueError:
            return False

    def _row(self, item: dict, last: dict, header: dict, reference: Reference, place: tuple) -> list:
        row: list = [self.ref_numbers[canonical(item["ref"])]]
        for path in header["columns"]:
            value = get_path(item, path)
            row.append(
                short_float32(value)
                if path in header["float32"]
                else self.encode(value, get_path(last, path), reference, place + (ITEM_PLACE, *path.split(".")))
            )
        return row

    def _header_out(self, header: dict) -> dict:
        key = canonical(header)
        if key in self.header_numbers:
            return {HEADER: self.header_numbers[key]}
        self.header_numbers[key] = len(self.headers)
        self.headers.append(header)
        entry: dict = {COLUMNS: header["columns"]}
        for name, field in ((FLOAT32, "float32"), (POSITIONAL, "positional")):
            if header[field]:
                entry[name] = header[field]
        if header["templates"]:
            entry[TEMPLATES] = {
                path: self._template_out(header["templates"][path]) for path in sorted(header["templates"])
            }
        return entry

    # -- reading ----------------------------------------------------------------------------

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


class VerifiedWriter:
    """Writes a section's values with one codec and reads each back with another, as an import will.

    A value that would read back as anything else is written whole (`{"$v": value}`), and both
    codecs start again empty, as a reader does at a value written whole (`RecordCodec.reset_at`)."""

    def __init__(self):
        self.writer, self.reader = RecordCodec(), RecordCodec()

    def write(self, values: list, previous: list, reference: Reference, reference_text: str) -> list:
        """Encode the values of one item (each against its previous, in order); return them encoded."""
        if not (isinstance(values[0], dict) and any(key.startswith("$") for key in values[0])):
            encoded = [self.writer.encode(value, before, reference) for value, before in zip(values, previous)]
            try:
                back = [
                    self.reader.decode(json.loads(canonical(value)), before, reference_text)
                    for value, before in zip(encoded, previous)
                ]
            except ValueError:
                back = None
            if back is not None and all(same(x, y) for x, y in zip(back, values)):
                return encoded
            logger.warning("A recorded value would not read back from the save file as written: written whole")
        self.writer, self.reader = RecordCodec(), RecordCodec()
        return [{VERBATIM: value} for value in values]
