"""The pieces of a recorded context item that the save file's codec (`portable/recorded.py`) reads
and writes: equality of JSON values, paths (`key` or `key.subkey`), 32-bit floats, templates
(a string made from the item's own numbers and strings), and what a row or a new item is
written against. Pure functions: the codec's writer and reader call the same ones, so what one
predicts the other rebuilds.
"""

from __future__ import annotations

import json
import math
import re
import struct
from typing import Any

NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?!\w|\.\d)")  # a number on its own, not a piece of a word or id
MAX_TEMPLATED = 300  # a longer string is not made a template of (a text is a delta of the prompts)
MAX_DECIMALS = 9
MIN_NAMED_STRING = 8  # a shorter string of an item is not looked for in its other strings


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


def float32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


def short_float32(value: Any) -> float | None:
    """The shortest float that reads back, as a 32-bit float, as `value` (None: `value` is no such float)."""
    if type(value) is not float or not math.isfinite(value):
        return None
    try:
        if float32(value) != value:
            return None
    except OverflowError:
        return None
    for digits in range(1, 10):
        candidate = float(f"{value:.{digits}g}")
        if float32(candidate) == value and math.copysign(1.0, candidate) == math.copysign(1.0, value):
            return candidate if len(repr(candidate)) < len(repr(value)) else None
    return None


# -- an item's paths and templates ---------------------------------------------------------


def get_path(item: Any, path: str) -> Any:
    key, _, sub = path.partition(".")
    value = item.get(key) if isinstance(item, dict) else None
    return (value.get(sub) if isinstance(value, dict) else None) if sub else value


def has_path(item: Any, path: str) -> bool:
    key, _, sub = path.partition(".")
    if not isinstance(item, dict) or key not in item:
        return False
    return not sub or (isinstance(item[key], dict) and sub in item[key])


def set_path(item: dict, path: str, value: Any, copied: set) -> None:
    """Set `path` in `item` (a copy of an earlier item: a nested dict is copied before it changes)."""
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


def item_leaves(item: dict) -> list[tuple[str, Any]]:
    """The item's numbers and strings by path (`key` or `key.subkey`), in path order."""
    out = []
    for key, value in item.items():
        if "." in key:
            continue
        if isinstance(value, dict):
            out.extend(
                (f"{key}.{sub}", inner)
                for sub, inner in value.items()
                if "." not in sub and (isinstance(inner, str) or type(inner) in (int, float))
            )
        elif isinstance(value, str) or type(value) in (int, float):
            out.append((key, value))
    return sorted(out)


def render_value(value: Any, decimals: int | None) -> str:
    if decimals is None:
        return value if isinstance(value, str) else repr(value) if type(value) is float else str(value)
    return f"{value:.{decimals}f}"


def render_template(parts: list, item: dict) -> str:
    """The string a template makes from `item`; ValueError for a part that does not fit it, or a string longer
    than any a template makes (`MAX_TEMPLATED`: a file cannot make a huge string of a small one, repeated)."""
    out: list[str] = []
    size = 0
    for part in parts:
        if size > MAX_TEMPLATED:
            raise ValueError(f"a template makes a string longer than {MAX_TEMPLATED} characters")
        if isinstance(part, str):
            out.append(part)
            size += len(part)
            continue
        value = get_path(item, part[0]) if has_path(item, part[0]) else None
        decimals = part[1] if len(part) == 2 else None
        if isinstance(value, str) and decimals is None:
            out.append(value)
        elif type(value) is int or (type(value) is float and math.isfinite(value)):
            out.append(render_value(value, decimals))
        else:
            raise ValueError(f"a template names {part[0]!r}, which is not a number or string of the item")
        size += len(out[-1])
    if size > MAX_TEMPLATED:
        raise ValueError(f"a template makes a string longer than {MAX_TEMPLATED} characters")
    return "".join(out)


def check_template(parts: Any) -> list:
    if not isinstance(parts, list):
        raise ValueError("a template is a list of strings and [path] or [path, decimals]")
    for part in parts:
        if isinstance(part, str):
            continue
        if (
            not isinstance(part, list)
            or not 1 <= len(part) <= 2
            or not isinstance(part[0], str)
            or (len(part) == 2 and (type(part[1]) is not int or not 0 <= part[1] <= MAX_DECIMALS))
        ):
            raise ValueError(f"a template part must be a string, [path] or [path, decimals 0-{MAX_DECIMALS}]")
    return parts


def make_template(text: str, item: dict, path: str) -> list | None:
    """A template that makes `text` from the item's other strings and numbers, or None (it names none of them)."""
    if len(text) > MAX_TEMPLATED:
        return None
    leaves = [(name, value) for name, value in item_leaves(item) if name != path]
    strings = [(name, value) for name, value in leaves if isinstance(value, str) and len(value) >= MIN_NAMED_STRING]
    numbers = [(name, value) for name, value in leaves if not isinstance(value, str)]
    pieces: list = [text]
    for name, value in strings:  # another string of the item inside this one (a key that holds an id)
        expanded: list = []
        for piece in pieces:
            if isinstance(piece, str) and value in piece:
                before, _, after = piece.partition(value)
                expanded.extend([before, [name], after])
            else:
                expanded.append(piece)
        pieces = expanded
    parts: list = []
    for piece in pieces:
        if not isinstance(piece, str):
            parts.append(piece)
            continue
        start = 0
        for match in NUMBER.finditer(piece):
            token = match.group()
            decimals = len(token) - token.index(".") - 1 if "." in token else None
            found = next(([name] for name, value in numbers if render_value(value, None) == token), None)
            if found is None and decimals is not None:
                found = next(
                    (
                        [name, decimals]
                        for name, value in numbers
                        if type(value) is float and f"{value:.{decimals}f}" == token
                    ),
                    None,
                )
            if found:
                parts.extend([piece[start : match.start()], found])
                start = match.end()
        parts.append(piece[start:])
    parts = [part for part in parts if part != ""]
    if all(isinstance(part, str) for part in parts):
        return None
    try:
        return parts if render_template(parts, item) == text else None
    except ValueError:
        return None


def renders(template: list, item: dict, text: Any) -> bool:
    try:
        return isinstance(text, str) and render_template(template, item) == text
    except ValueError:
        return False


def refuse(message: str):
    raise ValueError(message)


def positions(items: list[dict], before: list) -> list[dict | None]:
    """For each item, the previous list's item at the same place among those of its layer (or None)."""
    by_layer = items_by_layer(before)
    counters: dict[str, int] = {}
    out = []
    for item in items:
        layer = canonical(item.get("layer"))
        index = counters[layer] = counters.get(layer, -1) + 1
        neighbours = by_layer.get(layer, [])
        out.append(neighbours[index] if index < len(neighbours) else None)
    return out


def predicted(previous: dict | None, position: dict | None, header: dict | None) -> dict | None:
    """What a new item is written against: the entry before it, with its header's positional values."""
    if previous is None or header is None or position is None:
        return previous
    base, copied = dict(previous), set()
    for path in header["positional"]:
        if has_path(position, path) and (
            path.count(".") == 0 or isinstance(previous.get(path.partition(".")[0]), dict)
        ):
            set_path(base, path, get_path(position, path), copied)
    return base


def apply(last: dict, position: dict | None, header: dict, values: list) -> dict:
    """The item a row makes: its last version, the columns' values, the positional values, the templates."""
    item = dict(last)
    copied: set = set()
    for path, value in zip(header["columns"], values):
        set_path(item, path, value, copied)
    for path in header["positional"]:
        if position is None or not has_path(position, path):
            raise ValueError(f"takes {path} from the previous snapshot's item at its place, which has none")
        set_path(item, path, get_path(position, path), copied)
    for path, template in header["templates"].items():
        set_path(item, path, render_template(template, item), copied)
    return item


def items_by_layer(items: list) -> dict[str, list]:
    out: dict[str, list] = {}
    for item in items:
        if isinstance(item, dict):
            out.setdefault(canonical(item.get("layer")), []).append(item)
    return out


def as_list(value: Any, what: str) -> list:
    if not isinstance(value, list):
        raise ValueError(f"{what} must be a list")
    return value
