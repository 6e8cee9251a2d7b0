"""Regex keys in SillyTavern's `/pattern/flags` form: parse, compile once, validate.

Mirrors world-info.js `parseRegexFromString`: flags g i m s u y, an unescaped `/` inside the
pattern makes the key invalid; JavaScript named groups are translated. A regex-shaped key
that does not compile is matched as plain text by the engine (as SillyTavern does) and
refused by `key_errors` when an author saves it.
"""
from __future__ import annotations

import re
import string
from collections.abc import Iterable
from dataclasses import dataclass

# --- regex keys ----------------------------------------------------------------------------

_REGEX_SHAPE = re.compile(r"^/(.+)/([A-Za-z]*)$", re.DOTALL)
_ST_REGEX = re.compile(r"^/([\s\S]+?)/([gimsuy]*)$")  # parseRegexFromString's outer match
_UNESCAPED_SLASH = re.compile(r"(^|[^\\])/")


@dataclass(frozen=True)
class RegexKey:
    """A compiled `/pattern/flags` key. `sticky` (flag y) anchors the match at the buffer start.

    `literal` is a run of plain characters every match must start with (lowercased when the
    key has the i flag), or "": a buffer without it cannot match, so the regex is not run.
    """

    source: str
    pattern: re.Pattern
    sticky: bool
    literal: str = ""
    ignore_case: bool = False

    def search(self, haystack: str, lowered: str | None = None) -> re.Match | None:
        if self.literal:
            if self.ignore_case:
                if self.literal not in (lowered if lowered is not None else haystack.lower()):
                    return None
            elif self.literal not in haystack:
                return None
        return self.pattern.match(haystack) if self.sticky else self.pattern.search(haystack)


_LITERAL_CHARS = frozenset(string.ascii_letters + string.digits + " _-'")


def _required_literal(pattern: str) -> str:
    """Return the plain prefix every match of `pattern` starts with ("" when unsure)."""
    depth, in_class, escaped = 0, False, False
    for char in pattern:  # a top-level | means the prefix is not required
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            return ""
    run = []
    for char in pattern:
        if char not in _LITERAL_CHARS:
            break
        run.append(char)
    rest = pattern[len(run):]
    if rest[:1] in ("?", "*", "{") and run:
        run.pop()  # the last character is optional
    literal = "".join(run)
    return literal if len(literal) >= 3 else ""


def _js_to_python(pattern: str) -> str:
    # JavaScript named groups and back-references; everything else is shared syntax.
    pattern = re.sub(r"\(\?<(?![=!])([A-Za-z_][A-Za-z0-9_]*)>", r"(?P<\1>", pattern)
    return re.sub(r"\\k<([A-Za-z_][A-Za-z0-9_]*)>", r"(?P=\1)", pattern)


def parse_regex_key(key: str) -> tuple[RegexKey | None, str]:
    """Return (compiled key, "") for a valid `/pattern/flags` key, (None, why) otherwise.

    `why` is "" when the key is not regex-shaped at all (a plain key), else the reason a
    regex-shaped key is not a valid one. Mirrors world-info.js `parseRegexFromString`:
    flags g i m s u y; an unescaped `/` inside the pattern makes it invalid.
    """
    if not _REGEX_SHAPE.match(key):
        return None, ""
    match = _ST_REGEX.match(key)
    if not match:
        flags = _REGEX_SHAPE.match(key).group(2)
        bad = sorted(set(flags) - set("gimsuy"))
        if bad:
            return None, f"unknown flag{'s' if len(bad) > 1 else ''} {''.join(bad)} (use g, i, m, s, u, y)"
        return None, "not a /pattern/flags regular expression"
    pattern, flags = match.groups()
    if _UNESCAPED_SLASH.search(pattern):
        return None, "a / inside the pattern must be escaped as \\/"
    compile_flags = 0
    if "i" in flags:
        compile_flags |= re.IGNORECASE
    if "m" in flags:
        compile_flags |= re.MULTILINE
    if "s" in flags:
        compile_flags |= re.DOTALL
    try:
        compiled = re.compile(_js_to_python(pattern), compile_flags)
    except re.error as exc:
        return None, f"does not compile: {exc}"
    literal = _required_literal(pattern) if "m" not in flags and "x" not in flags else ""
    if "i" in flags:
        literal = literal.lower()
    return RegexKey(source=key, pattern=compiled, sticky="y" in flags, literal=literal, ignore_case="i" in flags), ""


def key_errors(keys: Iterable[str]) -> list[str]:
    """Return one message per regex-shaped key that is not a valid regular expression."""
    errors = []
    for key in keys:
        _compiled, why = parse_regex_key(key)
        if why:
            errors.append(f"Key “{key}” looks like a regular expression but {why}.")
    return errors
