"""How a save file writes what play recorded (a snapshot's memory context, a recorded query): each
value against what the file already holds, so a long chat's file grows with what is new.

Version 2 of the `narrator_snapshots` and `recorded_queries` sections. One `RecordCodec` reads
(or writes) a whole section in file order and remembers, across its items:

- the **last version of every context item by its `ref`** (the same chunk, turn or entry,
  whatever snapshot it was last in), and a table of the refs in the order they first came;
- a **table of strings** (every string value of a ref, every string a list of strings or a
  dict's added or removed key wrote out): a string already in it is written as its number;
- for each dict place (its keys from the root, list positions left out), the **last value of
  every key** there (a search result's label, once written, is not written again).

A value is written against the previous item's value at the same place (`previous`):

- a dict: only what changed, `"$-"` the keys removed, `"$+"` the keys added, each `[key]`
  (the last value of that key at this place) or `[key, value]`; a key is a string or the
  number of one in the table; the other keys hold their new values (`{}`: nothing changed);
- a list or string equal to the previous one: `{"$s": 1}`; a list of strings: `{"$I": [...]}`,
  each a number in the string table or the string (which joins the table); a long string
  copied from the prompts: `{"$d": ops}` (`narrator/snapshots.delta_encode`); a dict whose
  own keys start with `$`: `{"$v": value}`, as it is;
- a list of context items (dicts with a `ref`): `{"$items": [entries]}`, in order, each
  - a number: the item of that ref, unchanged since its last version;
  - `{"$n": dict}`: a new ref, the item written against the entry before it;
  - `{"$r": n, "$u": dict}`: the item of ref n, written against its last version;
  - `{"$c": [paths], "$f": [...], "$p": [...], "$t": {...}}`: the columns of the rows after it,
    until the next such entry: `$c` the paths (`key` or `key.subkey`) each row gives a value
    for, `$f` those given as the shortest decimal of a 32-bit float (a vector distance),
    `$p` the paths whose value is the one the previous snapshot's item at the same place in
    the same layer had (a rank and the score it gives), `$t` the strings made from the item's
    own numbers (`"rank 3 (distance 0.125)"` from `why.final_rank` and `why.semantic_distance`):
    a template of literal strings and `[path]` / `[path, decimals]`;
  - a row `[n, value, ...]`: the item of ref n, its last version with the columns' values.
  A cut candidate whose rank and score moved is therefore a few numbers; its text, reason and
  cut are in the file once, with the item its ref points to.

Every way of writing is checked by reading it back before it is chosen (a row that would not
rebuild its item exactly is written as `$r`); the export reads every item back with a second
codec and, were anything different, writes that item whole (`{"$v": ...}`), so a file never
holds a value it does not rebuild. `decode` raises ValueError for a marker that does not fit.
"""
from __future__ import annotations

import json
import math
import re
import struct
from typing import Any, Iterable

from studio.saves.narrator.snapshots import MIN_DELTA_STRING, Reference, delta_decode, delta_encode, delta_problem

SAME, DELTA, VERBATIM, STRINGS = "$s", "$d", "$v", "$I"
REMOVED, ADDED = "$-", "$+"
ITEMS, NEW, REF, UPDATE = "$items", "$n", "$r", "$u"
COLUMNS, FLOAT32, POSITIONAL, TEMPLATES = "$c", "$f", "$p", "$t"
NUMBER = re.compile(r"\d+(?:\.\d+)?")
MAX_DECIMALS = 9
ITEM_PLACE = "[item]"  # the place (for the remembered values) of a context item's own keys


def same(a: Any, b: Any) -> bool:
    """Whether two JSON values are the same value (1, 1.0 and true are not; nor 0.0 and -0.0)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return len(a) == len(b) and all(key in b and same(value, b[key]) for key, value in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return a == b


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _float32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


def short_float32(value: Any) -> float | None:
    """The shortest float that reads back, as a 32-bit float, as `value` (None: `value` is no such float)."""
    if type(value) is not float or not math.isfinite(value):
        return None
    try:
        if _float32(value) != value:
            return None
    except OverflowError:
        return None
    for digits in range(1, 10):
        candidate = float(f"{value:.{digits}g}")
        if _float32(candidate) == value and math.copysign(1.0, candidate) == math.copysign(1.0, value):
            return candidate if len(repr(candidate)) < len(repr(value)) else None
    return None


def _is_number(value: Any) -> bool:
    return type(value) in (int, float)


def _has_marker_keys(value: Any) -> bool:
    return isinstance(value, dict) and any(key.startswith("$") for key in value)


def _render_number(value: Any, decimals: int | None) -> str:
    if decimals is None:
        return repr(value) if type(value) is float else str(value)
    return f"{value:.{decimals}f}"


def _get(item: dict, path: str, default: Any = None) -> Any:
    key, _, sub = path.partition(".")
    value = item.get(key, default)
    if sub:
        return value.get(sub, default) if isinstance(value, dict) else default
    return value


def _has(item: Any, path: str) -> bool:
    key, _, sub = path.partition(".")
    if not isinstance(item, dict) or key not in item:
        return False
    return not sub or (isinstance(item[key], dict) and sub in item[key])


def _set(item: dict, path: str, value: Any, copied: set) -> None:
    """Set `path` in `item` (a copy of a last version: a nested dict is copied before it changes)."""
    key, _, sub = path.partition(".")
    if not sub:
        item[key] = value
        return
    if key not in copied:
        inner = item.get(key)
        if not isinstance(inner, dict):
            raise ValueError(f"sets {path!r} in an item whose {key!r} is not an object")
        item[key] = dict(inner)
        copied.add(key)
    item[key][sub] = value


def _numbers(item: dict) -> list[tuple[str, Any]]:
    """The item's numbers a template may name, by path (`key` or `key.subkey`), in path order."""
    out = []
    for key, value in item.items():
        if _is_number(value) and "." not in key:
            out.append((key, value))
        elif isinstance(value, dict) and "." not in key:
            out.extend((f"{key}.{sub}", inner) for sub, inner in value.items() if _is_number(inner) and "." not in sub)
    return sorted(out)


def render_template(parts: Any, item: dict) -> str:
    """The string a template makes from `item`'s numbers; ValueError for a template that does not fit."""
    if not isinstance(parts, list):
        raise ValueError("a template is a list of strings and [path] or [path, decimals]")
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
            continue
        if (not isinstance(part, list) or not 1 <= len(part) <= 2 or not isinstance(part[0], str)
                or (len(part) == 2 and (type(part[1]) is not int or not 0 <= part[1] <= MAX_DECIMALS))):
            raise ValueError(f"a template part must be a string, [path] or [path, decimals 0-{MAX_DECIMALS}]")
        value = _get(item, part[0]) if _has(item, part[0]) else None
        if not _is_number(value) or (type(value) is float and not math.isfinite(value)):
            raise ValueError(f"a template names {part[0]!r}, which is not a number of the item")
        out.append(_render_number(value, part[1] if len(part) == 2 else None))
    return "".join(out)


def make_template(text: str, item: dict, path: str) -> list | None:
    """A template that makes `text` from the item's own numbers, or None (no number of it is one of them)."""
    numbers = [(name, value) for name, value in _numbers(item) if name != path]
    if not numbers:
        return None
    parts: list = []
    start = 0
    for match in NUMBER.finditer(text):
        token = match.group()
        decimals = len(token) - token.index(".") - 1 if "." in token else None
        found = None
        for name, value in numbers:
            if _render_number(value, None) == token:
                found = [name]
            elif decimals is not None and type(value) is float and f"{value:.{decimals}f}" == token:
                found = [name, decimals]
            if found:
                break
        if found:
            parts.extend([text[start:match.start()], found] if match.start() > start else [found])
            start = match.end()
    if not parts:
        return None
    if start < len(text):
        parts.append(text[start:])
    return parts


class VerifiedWriter:
    """Writes a section's values with one codec and reads each back with another, as an import will.

    `write` returns the encoded value; were it to read back as anything else, the value is
    written whole instead (`{"$v": value}`), and both codecs start again empty, as a reader
    does at a value written whole (`RecordCodec.reset_at`)."""

    def __init__(self):
        self.writer, self.reader = RecordCodec(), RecordCodec()

    def write(self, values: list, previous: list, reference: Reference, reference_text: str) -> list:
        """Encode several values of one item together (each against its previous); return them encoded."""
        if _has_marker_keys(values[0]):  # written whole, as its reader starts again
            self.writer, self.reader = RecordCodec(), RecordCodec()
            return [{VERBATIM: value} for value in values]
        encoded = [self.writer.encode(value, before, reference) for value, before in zip(values, previous)]
        try:
            back = [self.reader.decode(json.loads(canonical(value)), before, reference_text)
                    for value, before in zip(encoded, previous)]
        except ValueError:
            back = None
        if back is None or not all(same(x, y) for x, y in zip(back, values)):
            self.writer, self.reader = RecordCodec(), RecordCodec()
            return [{VERBATIM: value} for value in values]
        return encoded


class RecordCodec:
    """Writes (`encode`) or reads (`decode`) the recorded values of one section, in file order (module docstring)."""

    def __init__(self):
        self.refs: list[str] = []
        self.ref_numbers: dict[str, int] = {}
        self.last: dict[str, dict] = {}
        self.strings: list[str] = []
        self.string_numbers: dict[str, int] = {}
        self.memory: dict[tuple, Any] = {}

    @staticmethod
    def reset_at(encoded: Any) -> bool:
        """Whether an item's encoded value was written whole after a value that did not read back
        (`VerifiedWriter`): the reader then starts again with an empty codec."""
        return isinstance(encoded, dict) and set(encoded) == {VERBATIM}

    # -- the tables -------------------------------------------------------------------------

    def _string_out(self, text: str) -> int | str:
        number = self.string_numbers.get(text)
        if number is None:
            self._learn_string(text)
            return text
        return number

    def _learn_string(self, text: str) -> None:
        if text not in self.string_numbers:
            self.string_numbers[text] = len(self.strings)
            self.strings.append(text)

    def _string_in(self, value: Any) -> str:
        if isinstance(value, str):
            self._learn_string(value)
            return value
        if type(value) is int and 0 <= value < len(self.strings):
            return self.strings[value]
        raise ValueError(f"names string {value!r} of the file's table, which does not exist")

    def _learn_ref(self, item: dict) -> None:
        key = canonical(item["ref"])
        if key not in self.ref_numbers:
            self.ref_numbers[key] = len(self.refs)
            self.refs.append(key)
        ref = item["ref"]
        for value in (ref.values() if isinstance(ref, dict) else [ref]):
            if isinstance(value, str):
                self._learn_string(value)
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
            if value and all(isinstance(x, dict) and "ref" in x and not any(k.startswith("$") for k in x) for x in value):
                return {ITEMS: self._encode_items(value, previous if isinstance(previous, list) else [], reference, place)}
            if value and all(isinstance(x, str) for x in value):
                return {STRINGS: [self._string_out(x) for x in value]}
            before = previous if isinstance(previous, list) else []
            return [self.encode(x, before[i] if i < len(before) else None, reference, place) for i, x in enumerate(value)]
        if isinstance(value, str) and len(value) >= MIN_DELTA_STRING:
            ops = delta_encode(value, reference)
            if sum(len(op) + 4 if isinstance(op, str) else 14 for op in ops) < len(value):
                return {DELTA: ops}
        return value

    def _encode_dict(self, value: dict, before: dict | None, reference: Reference, place: tuple) -> dict:
        if before is None:
            out = {key: self.encode(item, self.memory.get((place, key)), reference, place + (key,))
                   for key, item in sorted(value.items())}
        else:
            out = {}
            removed = [self._string_out(key) for key in sorted(before) if key not in value]
            added = []
            for key in sorted(value):
                if key in before:
                    continue
                remembered = self.memory.get((place, key))
                item = value[key]
                if (place, key) in self.memory and same(item, remembered):
                    added.append([self._string_out(key)])
                else:
                    added.append([self._string_out(key), self.encode(item, remembered, reference, place + (key,))])
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
        at_place = _by_layer(before)
        plans = []
        counters: dict[str, int] = {}
        for item in items:
            layer = canonical(item.get("layer"))
            index = counters[layer] = counters.get(layer, -1) + 1
            neighbour = at_place.get(layer, [])
            plans.append((item, canonical(item["ref"]), neighbour[index] if index < len(neighbour) else None))
        entries: list = []
        header: dict | None = None
        previous_item = None
        for index, (item, key, position) in enumerate(plans):
            last = self.last.get(key)
            if last is None:
                entries.append({NEW: self.encode(item, previous_item, reference, place + (ITEM_PLACE,))})
                self._learn_ref(item)
            elif same(item, last):
                entries.append(self.ref_numbers[key])
            else:
                fits = header is not None and self._fits(item, last, position, header)
                if not fits:
                    # New columns when the next changed item fits them too; a lone change is written against its last version.
                    shape = self._shape(item, last, position, header)
                    later = next(((i, p) for i, k, p in plans[index + 1:]
                                  if k in self.last and k != key and not same(i, self.last[k])), None)
                    if (shape is not None and self._fits(item, last, position, shape)
                            and later is not None and self._fits(later[0], self.last[canonical(later[0]["ref"])], later[1], shape)):
                        entries.append(_header_entry(shape))
                        header, fits = shape, True
                if fits:
                    entries.append(self._row(item, last, header, reference, place))
                else:
                    entries.append({REF: self.ref_numbers[key], UPDATE: self.encode(item, last, reference, place + (ITEM_PLACE,))})
                self.last[key] = item
            previous_item = item
        return entries

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
                paths.extend(f"{key}.{sub}" for sub in value if sub not in last[key] or not same(value[sub], last[key][sub]))
            else:
                paths.append(key)
        shape: dict = {"columns": [], "float32": [], "positional": [], "templates": {}}
        for path in sorted(paths):
            value = _get(item, path)
            if position is not None and _has(position, path) and same(_get(position, path), value):
                shape["positional"].append(path)
                continue
            if isinstance(value, str):
                template = (header or {}).get("templates", {}).get(path)
                if template is None or not _renders(template, item, value):
                    template = make_template(value, item, path)
                if template is not None and _renders(template, item, value):
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
            if not _has(item, path):
                return False
            value = _get(item, path)
            if path in header["float32"]:
                short = short_float32(value)
                if short is None:
                    return False
                value = _float32(short)
            values.append(value)
        try:
            return same(_apply(last, position, header, values), item)
        except ValueError:
            return False

    def _row(self, item: dict, last: dict, header: dict, reference: Reference, place: tuple) -> list:
        row: list = [self.ref_numbers[canonical(item["ref"])]]
        for path in header["columns"]:
            value = _get(item, path)
            row.append(short_float32(value) if path in header["float32"] else
                       self.encode(value, _get(last, path), reference, place + (ITEM_PLACE,) + tuple(path.split("."))))
        return row

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
                if not isinstance(value[STRINGS], list):
                    raise ValueError("a list of strings ($I) must be a list")
                return [self._string_in(x) for x in value[STRINGS]]
            if keys == {ITEMS}:
                return self._decode_items(value[ITEMS], previous if isinstance(previous, list) else [], reference, place)
            return self._decode_dict(value, previous if isinstance(previous, dict) else None, reference, place)
        if isinstance(value, list):
            before = previous if isinstance(previous, list) else []
            return [self.decode(x, before[i] if i < len(before) else None, reference, place) for i, x in enumerate(value)]
        return value

    def _decode_dict(self, value: dict, before: dict | None, reference: str, place: tuple) -> dict:
        if before is None:
            if any(key.startswith("$") for key in value):
                raise ValueError(f"has keys {sorted(k for k in value if k.startswith('$'))} that are no marker here")
            out = {key: self.decode(item, self.memory.get((place, key)), reference, place + (key,))
                   for key, item in sorted(value.items())}
        else:
            unknown = [key for key in value if key.startswith("$") and key not in (REMOVED, ADDED)]
            if unknown:
                raise ValueError(f"has keys {sorted(unknown)} that are no marker here")
            out = dict(before)
            for name in _list(value.get(REMOVED, []), REMOVED):
                key = self._string_in(name)
                if key not in out:
                    raise ValueError(f"removes the key {key!r}, which the previous value does not have")
                del out[key]
            for entry in _list(value.get(ADDED, []), ADDED):
                if not isinstance(entry, list) or len(entry) not in (1, 2):
                    raise ValueError("an added key ($+) is [key] or [key, value]")
                key = self._string_in(entry[0])
                if key in before or key.startswith("$"):
                    raise ValueError(f"adds the key {key!r}, which the previous value already has")
                if len(entry) == 1:
                    if (place, key) not in self.memory:
                        raise ValueError(f"adds the key {key!r} with its last value, and it has none")
                    out[key] = self.memory[(place, key)]
                else:
                    out[key] = self.decode(entry[1], self.memory.get((place, key)), reference, place + (key,))
            for key in sorted(k for k in value if not k.startswith("$")):
                if key not in before:
                    raise ValueError(f"changes the key {key!r}, which the previous value does not have")
                out[key] = self.decode(value[key], before[key], reference, place + (key,))
        self._remember(place, out)
        return out

    def _decode_items(self, entries: Any, before: list, reference: str, place: tuple) -> list:
        at_place = _by_layer(before)
        counters: dict[str, int] = {}
        header: dict | None = None
        out: list = []
        for entry in _list(entries, ITEMS):
            if isinstance(entry, dict) and COLUMNS in entry:
                header = _read_header(entry)
                continue
            if isinstance(entry, dict) and set(entry) == {NEW}:
                item = self.decode(entry[NEW], out[-1] if out else None, reference, place + (ITEM_PLACE,))
                if not isinstance(item, dict) or "ref" not in item:
                    raise ValueError("a new item ($n) must be an object with a ref")
                self._learn_ref(item)
            elif type(entry) is int:
                item = self.last[self._ref_in(entry)]
            elif isinstance(entry, dict) and set(entry) == {REF, UPDATE}:
                key = self._ref_in(entry[REF])
                item = self.decode(entry[UPDATE], self.last[key], reference, place + (ITEM_PLACE,))
                if not isinstance(item, dict) or canonical(item.get("ref")) != key:
                    raise ValueError("an item written against its last version ($r) must keep its ref")
                self.last[key] = item
            elif isinstance(entry, list):
                if header is None or len(entry) != 1 + len(header["columns"]):
                    raise ValueError("a row must follow its columns ($c) and give one value for each")
                key = self._ref_in(entry[0])
                last = self.last[key]
                layer = canonical(last.get("layer"))
                neighbour = at_place.get(layer, [])
                index = counters.get(layer, -1) + 1
                item = self._decode_row(entry, last, neighbour[index] if index < len(neighbour) else None,
                                        header, reference, place)
                self.last[key] = item
            else:
                raise ValueError("an item entry must be a number, a row, {$n}, {$r, $u} or {$c}")
            layer = canonical(item.get("layer"))
            counters[layer] = counters.get(layer, -1) + 1
            out.append(item)
        return out

    def _decode_row(self, entry: list, last: dict, position: dict | None, header: dict, reference: str, place: tuple) -> dict:
        values = []
        for path, value in zip(header["columns"], entry[1:]):
            if path in header["float32"]:
                if type(value) is not float or not math.isfinite(value):
                    raise ValueError(f"{path} ($f) must be a decimal number")
                try:
                    values.append(_float32(value))
                except OverflowError:
                    raise ValueError(f"{path} ($f) is too large for a 32-bit float") from None
            else:
                values.append(self.decode(value, _get(last, path), reference, place + (ITEM_PLACE,) + tuple(path.split("."))))
        return _apply(last, position, header, values)


def _apply(last: dict, position: dict | None, header: dict, values: list) -> dict:
    """The item a row makes: its last version, the columns' values, the positional values, the templates."""
    item = dict(last)
    copied: set = set()
    for path, value in zip(header["columns"], values):
        _set(item, path, value, copied)
    for path in header["positional"]:
        if position is None or not _has(position, path):
            raise ValueError(f"takes {path} from the previous snapshot's item at its place, which has none")
        _set(item, path, _get(position, path), copied)
    for path, template in header["templates"].items():
        _set(item, path, render_template(template, item), copied)
    return item


def _renders(template: list, item: dict, text: str) -> bool:
    try:
        return render_template(template, item) == text
    except ValueError:
        return False


def _by_layer(items: list) -> dict[str, list]:
    out: dict[str, list] = {}
    for item in items:
        if isinstance(item, dict):
            out.setdefault(canonical(item.get("layer")), []).append(item)
    return out


def _list(value: Any, what: str) -> list:
    if not isinstance(value, list):
        raise ValueError(f"{what} must be a list")
    return value


def _header_entry(shape: dict) -> dict:
    entry: dict = {COLUMNS: shape["columns"]}
    if shape["float32"]:
        entry[FLOAT32] = shape["float32"]
    if shape["positional"]:
        entry[POSITIONAL] = shape["positional"]
    if shape["templates"]:
        entry[TEMPLATES] = shape["templates"]
    return entry


def _read_header(entry: dict) -> dict:
    if set(entry) - {COLUMNS, FLOAT32, POSITIONAL, TEMPLATES}:
        raise ValueError("columns ($c) take only $c, $f, $p and $t")
    columns, float32 = entry[COLUMNS], entry.get(FLOAT32, [])
    positional, templates = entry.get(POSITIONAL, []), entry.get(TEMPLATES, {})
    paths = [*_list(columns, COLUMNS), *_list(float32, FLOAT32), *_list(positional, POSITIONAL)]
    if not isinstance(templates, dict):
        raise ValueError("templates ($t) must be an object")
    for path in [*paths, *templates]:
        if not isinstance(path, str) or not path or path.count(".") > 1 or path.startswith("$") or path.endswith("."):
            raise ValueError(f"{path!r} is not a path (key or key.subkey)")
    if not set(float32) <= set(columns):
        raise ValueError("every $f path must be one of the columns ($c)")
    return {"columns": list(columns), "float32": list(float32), "positional": list(positional), "templates": dict(templates)}

