"""Reading JSON out of what models really answer.

`scan_json` is a tolerant, incremental JSON reader. It finds every JSON object or array in a
text (prose, ``` fences and repeated answers around or between them are skipped) and reads
each as far as it goes:

- an answer cut by the token limit keeps everything complete before the cut: an array
  drops its unfinished last element, an object keeps its complete members. Containers
  that ended early are listed in `JSONScan.incomplete` (by `id`), so a caller can drop an
  unfinished item rather than store half of it;
- small-model slips are accepted: trailing or doubled commas, a missing comma between
  elements, single-quoted strings, unquoted keys, raw newlines in strings, Python's
  True / False / None;
- text that only looks like JSON ("{name}", "[sic]") is skipped, not an error.

`parse_items(text, key)` is what the living modules call: the list of items under `key`
(or a bare list, or a single item object), without unfinished items; None when the text
holds no JSON at all.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from json.decoder import scanstring

__all__ = [
    "JSONScan",
    "scan_json",
    "parse_items",
    "scan_items",
    "parse_json_payload",
    "salvage_json_objects",
    "strip_code_fences",
]

_FENCE = "```"
_NUMBER = re.compile(r"-?(?:\d+)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_\- ]{0,40}?(?=\s*:)")
_LITERALS = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}
_WS = " \t\r\n"


class _Invalid(Exception):
    """The text at this position is not JSON."""


class _Missing:
    pass


_MISSING = _Missing()


@dataclass
class JSONScan:
    """The JSON values found in a text, and whether the last one was cut off."""

    values: list = field(default_factory=list)
    truncated: bool = False  # the text ended inside a value
    broken: bool = False  # a value stopped at something that is not JSON
    incomplete: set[int] = field(default_factory=set)  # ids of containers that ended early

    def is_complete(self, value) -> bool:
        return id(value) not in self.incomplete


class _Reader:
    def __init__(self, text: str, scan: JSONScan):
        self.text = text
        self.n = len(text)
        self.pos = 0
        self.scan = scan
        self.hit_end = False

    def ws(self) -> None:
        while self.pos < self.n and self.text[self.pos] in _WS:
            self.pos += 1

    def at_end(self) -> bool:
        if self.pos >= self.n:
            self.hit_end = True
            return True
        return False

    def value(self):
        """Return (value, complete). Raise _Invalid when the text here is not a JSON value."""
        self.ws()
        if self.at_end():
            return _MISSING, False
        char = self.text[self.pos]
        if char == "{":
            return self.container({}, "}")
        if char == "[":
            return self.container([], "]")
        if char in "\"'":
            return self.string(char)
        match = _NUMBER.match(self.text, self.pos)
        if match:
            self.pos = match.end()
            number = match.group()
            if self.pos >= self.n:
                self.hit_end = True
                return _MISSING, False  # "12" may have been "125"
            return (float(number) if any(c in number for c in ".eE") else int(number)), True
        for word, literal in _LITERALS.items():
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return literal, True
            if word.startswith(self.text[self.pos :]) and self.pos < self.n:
                self.pos = self.n
                self.hit_end = True
                return _MISSING, False
        raise _Invalid(self.pos)

    def string(self, quote: str):
        start = self.pos + 1
        if quote == '"':
            try:
                value, end = scanstring(self.text, start, False)
            except json.JSONDecodeError as exc:
                if "Unterminated" in exc.msg or exc.pos >= self.n - 1:
                    self.pos = self.n
                    self.hit_end = True
                    return self.text[start:], False
                raise _Invalid(self.pos) from exc
            self.pos = end
            return value, True
        end = start
        while end < self.n:
            if self.text[end] == "\\":
                end += 2
                continue
            if self.text[end] == quote:
                self.pos = end + 1
                return self.text[start:end].replace("\\'", "'"), True
            end += 1
        self.pos = self.n
        self.hit_end = True
        return self.text[start:], False

    def key(self):
        self.ws()
        if self.at_end():
            return _MISSING, False
        char = self.text[self.pos]
        if char in "\"'":
            return self.string(char)
        match = _IDENTIFIER.match(self.text, self.pos)
        if match:
            self.pos = match.end()
            return match.group().strip(), True
        raise _Invalid(self.pos)

    def container(self, box, closer: str):
        """Read an object ({}) or array ([]) from the opening bracket at self.pos."""
        self.pos += 1
        is_object = isinstance(box, dict)
        try:
            while True:
                self.ws()
                if self.at_end():
                    return self._cut(box)
                char = self.text[self.pos]
                if char == closer:
                    self.pos += 1
                    return box, True
                if char == ",":
                    self.pos += 1
                    continue
                if is_object:
                    name, complete = self.key()
                    if not complete:
                        return self._cut(box)
                    self.ws()
                    if self.at_end():
                        return self._cut(box)
                    if self.text[self.pos] not in ":=":
                        raise _Invalid(self.pos)
                    self.pos += 1
                    value, complete = self.value()
                    if value is not _MISSING:
                        box[str(name)] = value
                    if not complete:
                        return self._cut(box)
                else:
                    value, complete = self.value()
                    if not complete:
                        return self._cut(box)  # the unfinished element is dropped
                    box.append(value)
        except _Invalid:
            if not box:
                raise
            self.scan.broken = True
            return self._cut(box)

    def _cut(self, box):
        self.scan.incomplete.add(id(box))
        return box, False


def scan_json(text: str) -> JSONScan:
    """Return every JSON object or array in `text`, read as far as each goes."""
    text = text or ""
    scan = JSONScan()
    position = 0
    while position < len(text):
        brace = text.find("{", position)
        bracket = text.find("[", position)
        starts = [p for p in (brace, bracket) if p >= 0]
        if not starts:
            break
        start = min(starts)
        reader = _Reader(text, scan)
        reader.pos = start
        try:
            value, complete = reader.value()
        except _Invalid:
            position = start + 1
            continue
        if value is not _MISSING:
            scan.values.append(value)
        if not complete and reader.hit_end:
            scan.truncated = True
            break
        position = max(reader.pos, start + 1)
    return scan


def _find_key(value: dict, key: str):
    """Return value[key] matched case-insensitively, looking one level down too."""
    if key in value:
        return value[key]
    folded = key.casefold()
    for name, inner in value.items():
        if str(name).casefold() == folded:
            return inner
    for inner in value.values():
        if isinstance(inner, dict):
            for name, deeper in inner.items():
                if str(name).casefold() == folded:
                    return deeper
    return _MISSING


@dataclass
class ItemScan:
    """The items of an answer, and what happened to the rest of it."""

    items: list
    found_json: bool
    truncated: bool
    dropped_incomplete: int = 0


def scan_items(text: str, key: str, *, is_item=None) -> ItemScan:
    """Return the complete items under `key` (a bare list and a single item object count too).

    `is_item(dict)` says whether an object without `key` is itself an item (default: any
    object). Repeated answers ({"facts": [...]} twice) give all their items; callers drop
    duplicates by content.
    """
    scan = scan_json(text)
    items: list = []
    dropped = 0

    def add(element) -> None:
        nonlocal dropped
        if isinstance(element, (dict, list)) and not scan.is_complete(element):
            dropped += 1
            return
        items.append(element)

    def add_list(elements: list) -> None:
        for element in elements:
            if isinstance(element, dict):
                inner = _find_key(element, key)
                if isinstance(inner, list):
                    add_list(inner)
                    continue
            add(element)

    for value in scan.values:
        if isinstance(value, list):
            add_list(value)
        elif isinstance(value, dict):
            inner = _find_key(value, key)
            if isinstance(inner, list):
                add_list(inner)
            elif isinstance(inner, dict):
                add(inner)
            elif is_item is None or is_item(value):
                add(value)
            else:
                lists = [v for v in value.values() if isinstance(v, list) and any(isinstance(e, dict) for e in v)]
                if len(lists) == 1:
                    add_list(lists[0])
                else:
                    add(value)
    return ItemScan(items=items, found_json=bool(scan.values), truncated=scan.truncated, dropped_incomplete=dropped)


def parse_items(text: str, key: str) -> list | None:
    """Return the list of complete items under `key` in a model answer; None without JSON.

    Accepts {key: [...]}, a bare list, a single item object, fenced or prose-wrapped JSON,
    repeated answers, and a truncated answer (its complete items are kept).
    """
    result = scan_items(text, key)
    return result.items if result.found_json else None


def strip_code_fences(text: str) -> str:
    """Return the inside of the first ``` fenced block, or `text` unchanged without one."""
    text = text or ""
    start = text.find(_FENCE)
    if start < 0:
        return text
    body_start = text.find("\n", start)
    if body_start < 0:
        return text
    end = text.find(_FENCE, body_start)
    return text[body_start + 1 : end if end >= 0 else len(text)]


def parse_json_payload(text: str):
    """Return the first complete JSON object or array in `text` (fences and prose tolerated).

    Return None when nothing complete decodes.
    """
    scan = scan_json(text)
    for value in scan.values:
        if scan.is_complete(value):
            return value
    return None


def salvage_json_objects(text: str) -> list[dict]:
    """Return the complete JSON objects of `text`, looking inside a cut outer object or list.

    A complete top-level object is returned whole (its nested objects are not listed
    separately); of an outer object or list that was cut, the complete objects it holds are.
    """
    scan = scan_json(text)
    found: list[dict] = []

    def walk(value) -> None:
        if isinstance(value, dict):
            if scan.is_complete(value):
                found.append(value)
                return
            for inner in value.values():
                if isinstance(inner, (dict, list)):
                    walk(inner)
        elif isinstance(value, list):
            for inner in value:
                if isinstance(inner, (dict, list)):
                    walk(inner)

    for value in scan.values:
        walk(value)
    return found
