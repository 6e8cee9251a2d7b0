"""Field maps between a file format's entry and the studio's activation columns, and decorators.

A `FieldMap` says where a column lives in a file entry (one or more paths, the first present
wins), how a file value becomes a column value and back, and what the column is when the
file has none of the paths. Two rules make export lossless:

- import: `decode` every map; what no map reads is kept verbatim (LoreEntry.extensions);
- export: a column whose value still equals what the kept entry decodes to is written
  back as the kept representation (so `null` stays `null`, `true` stays `true`, a missing
  field stays missing); a changed column is written in the map's canonical form.

Decorators (CCv3 `@@name value` lines at the start of `content`, with `@@@` fallbacks) are
parsed by `split_decorators` / `effective_decorators` and rebuilt by `rebuild_decorators`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

_MISSING = object()


@dataclass(frozen=True)
class FieldMap:
    column: str
    paths: tuple[tuple[str, ...], ...]
    decode: Callable[[Any], Any]
    encode: Callable[[Any], Any]
    missing: Any

    @property
    def label(self) -> str:
        return ".".join(self.paths[0])


def get_path(raw: dict, path: tuple[str, ...]) -> Any:
    value: Any = raw
    for part in path:
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def set_path(raw: dict, path: tuple[str, ...], value: Any) -> None:
    target = raw
    for part in path[:-1]:
        child = target.get(part)
        if not isinstance(child, dict):
            child = {}
        else:
            child = dict(child)
        target[part] = child
        target = child
    target[path[-1]] = value


def decode_one(raw: dict, field: FieldMap) -> tuple[Any, str | None]:
    """Return (column value, the path label it came from or None)."""
    for path in field.paths:
        value = get_path(raw, path)
        if value is not _MISSING:
            return field.decode(value), ".".join(path)
    return field.missing, None


def decode_fields(raw: dict, maps: Iterable[FieldMap]) -> tuple[dict[str, Any], list[str]]:
    """Return the columns the entry sets and the labels of the file fields that were read."""
    columns, read = {}, []
    for field in maps:
        value, where = decode_one(raw, field)
        columns[field.column] = value
        if where:
            read.append(where)
    return columns, read


def encode_fields(
    kept: dict,
    columns: dict[str, Any],
    maps: Iterable[FieldMap],
    kept_columns: dict[str, Any],
    skip: set[str] = frozenset(),
) -> dict:
    """Return `kept` with every changed column written back (see the module docstring)."""
    out = dict(kept)
    for field in maps:
        if field.column in skip or field.column not in columns:
            continue
        value = columns[field.column]
        if kept_columns.get(field.column, _MISSING) == value:
            continue  # unchanged: the kept representation (or its absence) stays
        where = next((p for p in field.paths if get_path(out, p) is not _MISSING), field.paths[0])
        set_path(out, where, field.encode(value))
    return out


# --- coercions shared by the formats -------------------------------------------------------


def as_bool(value: Any) -> bool:
    return bool(value) and value not in ("false", "0")


def as_optional_bool(value: Any) -> bool | None:
    return None if value is None else as_bool(value)


def as_int(default: int, low: int | None = None, high: int | None = None) -> Callable[[Any], int]:
    def convert(value: Any) -> int:
        try:
            number = int(round(float(value))) if not isinstance(value, bool) else default
        except (TypeError, ValueError):
            number = default
        if low is not None:
            number = max(low, number)
        if high is not None:
            number = min(high, number)
        return number

    return convert


def as_optional_int(low: int | None = None, high: int | None = None) -> Callable[[Any], int | None]:
    convert = as_int(0, low, high)

    def optional(value: Any) -> int | None:
        if value is None or value == "" or isinstance(value, bool):
            return None
        return convert(value)

    return optional


def as_text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def as_key_list(value: Any) -> list[str]:
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list):
        return []
    keys, seen = [], set()
    for item in value:
        if isinstance(item, str) and item.strip() and item.strip() not in seen:
            seen.add(item.strip())
            keys.append(item.strip())
    return keys


def identity(value: Any) -> Any:
    return value


# --- decorators ------------------------------------------------------------------------------

# Decorator name -> how many times it may act (CCv3: "only the first, unless defined to be
# used multiple times"; @@additional_keys may repeat).
REPEATABLE = {"additional_keys"}
CCV3_SUPPORTED = {
    "activate",
    "dont_activate",
    "depth",
    "scan_depth",
    "role",
    "position",
    "activate_only_after",
    "activate_only_every",
    "keep_activate_after_match",
    "dont_activate_after_match",
    "additional_keys",
    "exclude_keys",
    "ignore_on_max_context",
}
SILLYTAVERN_SUPPORTED = {"activate", "dont_activate"}  # world-info.js KNOWN_DECORATORS
ROLE_NUMBERS = {"system": 0, "user": 1, "assistant": 2}
POSITION_NAMES = {"before_desc": 0, "after_desc": 1}


def split_decorators(content: str) -> tuple[list[str], str]:
    """Split `content` into its leading `@@` lines and the text after them.

    As world-info.js parseDecorators: only a content that starts with `@@` has decorators;
    the text starts at the first line that does not start with `@@`. A content made only of
    decorator lines keeps no text (and is rebuilt from the lines alone).
    """
    if not content.startswith("@@"):
        return [], content
    lines = content.split("\n")
    for index, line in enumerate(lines):
        if not line.startswith("@@"):
            return lines[:index], "\n".join(lines[index:])
    return lines, ""


def join_decorators(lines: list[str], text: str) -> str:
    if not lines:
        return text
    return "\n".join(lines + ([text] if text else []))


def _parse_line(line: str) -> tuple[str, str]:
    body = line.lstrip("@")
    name, _, value = body.partition(" ")
    return name.strip(), value.strip()


def _value_ok(name: str, value: str) -> bool:
    if name in ("depth", "scan_depth", "activate_only_after", "activate_only_every"):
        try:
            return int(value) >= 0
        except ValueError:
            return False
    if name == "role":
        return value in ROLE_NUMBERS
    if name == "position":
        return value in POSITION_NAMES
    if name in ("additional_keys", "exclude_keys"):
        return bool(as_key_list(value))
    return True


def effective_decorators(lines: list[str], supported: set[str]) -> tuple[list[tuple[str, str, int]], list[str]]:
    """Return the decorators that act as (name, value, line index), and the lines only kept.

    CCv3 fallbacks: a `@@@` line is considered only while the decorator before it (and every
    fallback in between) was unrecognised or ignored.
    """
    acting: list[tuple[str, str, int]] = []
    kept: list[str] = []
    used: set[str] = set()
    fallback_open = False
    for index, line in enumerate(lines):
        is_fallback = line.startswith("@@@")
        if is_fallback and not fallback_open:
            kept.append(line)
            continue
        name, value = _parse_line(line)
        if name in supported and _value_ok(name, value) and (name not in used or name in REPEATABLE):
            acting.append((name, value, index))
            used.add(name)
            fallback_open = False
        else:
            kept.append(line)
            fallback_open = True
    return acting, kept


def decorator_columns(acting: list[tuple[str, str, int]]) -> dict[str, Any]:
    """Return the activation columns the acting decorators set."""
    names = {name for name, _value, _index in acting}
    columns: dict[str, Any] = {}
    for name, value, _index in acting:
        if name == "activate":
            columns["forced"] = "activate"
        elif name == "dont_activate" and "activate" not in names:
            columns["forced"] = "dont_activate"
        elif name == "depth" and "position" not in names:
            columns["position"], columns["depth"] = 4, int(value)
        elif name == "position":
            columns["position"] = POSITION_NAMES[value]
        elif name == "scan_depth":
            columns["scan_depth"] = min(int(value), 1000)
        elif name == "role":
            columns["role"] = ROLE_NUMBERS[value]
        elif name in ("activate_only_after", "activate_only_every"):
            columns[name] = int(value)
        elif name == "keep_activate_after_match":
            columns["after_first_match"] = "keep"
        elif name == "dont_activate_after_match" and "keep_activate_after_match" not in names:
            columns["after_first_match"] = "stop"
        elif name == "additional_keys":
            columns.setdefault("additional_keys", []).append(as_key_list(value))
        elif name == "exclude_keys":
            columns["exclude_keys"] = as_key_list(value)
        elif name == "ignore_on_max_context":
            columns["ignore_on_max_context"] = True
    return columns


DECORATOR_ONLY_DEFAULTS = {
    "forced": "",
    "activate_only_after": 0,
    "activate_only_every": 0,
    "after_first_match": "",
    "additional_keys": [],
    "exclude_keys": [],
    "ignore_on_max_context": False,
}


def canonical_lines(columns: dict[str, Any], names: Iterable[str], supported: set[str]) -> list[str]:
    """Return decorator lines expressing `names` (columns) in their canonical form."""
    lines = []
    names = set(names)
    if "forced" in names and columns.get("forced") == "activate":
        lines.append("@@activate")
    if "forced" in names and columns.get("forced") == "dont_activate":
        lines.append("@@dont_activate")
    if "position" in names and "position" in supported:
        position = columns.get("position")
        if position == 4 and "depth" in supported:
            lines.append(f"@@depth {columns.get('depth', 4)}")
        elif position in (0, 1):
            lines.append(f"@@position {'before_desc' if position == 0 else 'after_desc'}")
    if "scan_depth" in names and columns.get("scan_depth") is not None:
        lines.append(f"@@scan_depth {columns['scan_depth']}")
    if "role" in names and columns.get("role") is not None:
        lines.append(f"@@role {next(k for k, v in ROLE_NUMBERS.items() if v == columns['role'])}")
    for name in ("activate_only_after", "activate_only_every"):
        if name in names and columns.get(name):
            lines.append(f"@@{name} {columns[name]}")
    if "after_first_match" in names and columns.get("after_first_match"):
        lines.append(
            "@@keep_activate_after_match" if columns["after_first_match"] == "keep" else "@@dont_activate_after_match"
        )
    if "additional_keys" in names:
        lines.extend("@@additional_keys " + ",".join(group) for group in columns.get("additional_keys") or [] if group)
    if "exclude_keys" in names and columns.get("exclude_keys"):
        lines.append("@@exclude_keys " + ",".join(columns["exclude_keys"]))
    if "ignore_on_max_context" in names and columns.get("ignore_on_max_context"):
        lines.append("@@ignore_on_max_context")
    return lines


DECORATOR_COLUMN_OF = {
    "activate": ("forced",),
    "dont_activate": ("forced",),
    "depth": ("position", "depth"),
    "position": ("position",),
    "scan_depth": ("scan_depth",),
    "role": ("role",),
    "activate_only_after": ("activate_only_after",),
    "activate_only_every": ("activate_only_every",),
    "keep_activate_after_match": ("after_first_match",),
    "dont_activate_after_match": ("after_first_match",),
    "additional_keys": ("additional_keys",),
    "exclude_keys": ("exclude_keys",),
    "ignore_on_max_context": ("ignore_on_max_context",),
}


def rebuild_decorators(
    kept_lines: list[str], columns: dict[str, Any], supported: set[str], extra_names: Iterable[str] = ()
) -> list[str]:
    """Return decorator lines for `columns`: the kept lines when they still say the same.

    `extra_names` are columns with no field in the format (they can only travel as
    decorators, e.g. @@activate_only_after in SillyTavern's JSON).
    """
    acting, _kept = effective_decorators(kept_lines, supported)
    backed = {c for name, _v, _i in acting for c in DECORATOR_COLUMN_OF.get(name, ())}
    names = backed | set(extra_names)
    decoded = {**{c: DECORATOR_ONLY_DEFAULTS.get(c) for c in names}, **decorator_columns(acting)}
    if all(decoded.get(c) == columns.get(c) for c in names if c in columns):
        return kept_lines
    acting_lines = {index for _n, _v, index in acting}
    preserved, skipping_fallbacks = [], False
    for index, line in enumerate(kept_lines):
        if index in acting_lines:
            skipping_fallbacks = True
            continue
        if line.startswith("@@@") and skipping_fallbacks:
            continue
        skipping_fallbacks = False
        preserved.append(line)
    return canonical_lines(columns, names, supported) + preserved
