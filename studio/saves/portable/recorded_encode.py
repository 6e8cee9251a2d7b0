"""Writing a save file's recorded values: `RecordWriting.encode`, each value against what the file holds.

A dict as what changed, a list or string equal to the previous one as `$s`, a list of
strings by the string table, a long string as a delta of the prompts or the chat, and a list
of context items as entries against each item's last version: a ref's number, a row of the
columns that changed (`$c` headers, 32-bit floats, positional values, templates), a new ref
against the entry before it (`$n`), or an item against its last version (`$r`/`$u`). Each row
is checked to rebuild its item before it is written. The format is described in recorded.py;
the reader is recorded_decode.py.
"""

from __future__ import annotations

from typing import Any

from studio.saves.narrator.snapshots import MIN_DELTA_STRING, Reference, delta_encode
from studio.saves.portable.recorded_items import (
    apply,
    canonical,
    float32,
    get_path,
    has_path,
    item_leaves,
    items_by_layer,
    make_template,
    positions,
    predicted,
    renders,
    same,
    set_path,
    short_float32,
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


class RecordWriting(RecordTables):
    """The writing half of `RecordCodec`: `encode` a value against the previous item's at its place."""

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
