"""Regex keys in SillyTavern's `/pattern/flags` form: parse, compile once, validate, run in bounded time.

Mirrors world-info.js `parseRegexFromString`: flags g i m s u y, an unescaped `/` inside the
pattern makes the key invalid; JavaScript named groups are translated. A regex-shaped key
that does not compile is matched as plain text by the engine (as SillyTavern does) and
refused by `key_errors` when an author saves it.

What runs a key (see `regex_safety`): Python's parser fixes the pattern's meaning; when RE2
can run exactly that meaning the key runs on google-re2 (linear time, no limit needed),
otherwise on the `regex` module with `REGEX_TIMEOUT` seconds per search. A search past the
limit raises `RegexTimeout`: the scan buffer counts the key as not matching and the
explanation says so. A key RE2 cannot run whose shape is known to be catastrophic is named
by `key_hazards`, and every save path refuses it.
"""
from __future__ import annotations

import functools
import re
import string
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import re2
import regex

from studio.memory.lore_activation.regex_safety import NotRE2, hazard, parse, to_re2

REGEX_TIMEOUT = 0.1  # seconds one search of a key the `regex` module runs may take
ENGINE_RE2, ENGINE_REGEX = "re2", "regex"


class RegexTimeout(Exception):
    """A regex key's search ran past REGEX_TIMEOUT; the key counts as not matching."""


def _re2_options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # a pattern RE2 refuses falls back quietly
    options.never_capture = True  # only where a match starts is needed
    return options


_RE2_OPTIONS = _re2_options()

# --- regex keys ----------------------------------------------------------------------------

_REGEX_SHAPE = re.compile(r"^/(.+)/([A-Za-z]*)$", re.DOTALL)
_ST_REGEX = re.compile(r"^/([\s\S]+?)/([gimsuy]*)$")  # parseRegexFromString's outer match
_UNESCAPED_SLASH = re.compile(r"(^|[^\\])/")


@dataclass(frozen=True)
class RegexKey:
    """A compiled `/pattern/flags` key. `sticky` (flag y) anchors the match at the buffer start.

    `literal` is a run of plain characters every match must start with (lowercased when the
    key has the i flag), or "": a buffer without it cannot match, so the regex is not run.
    `engine` says what runs it: "re2" (linear time) or "regex" (with REGEX_TIMEOUT).
    """

    source: str
    pattern: Any  # a compiled RE2 pattern, or a `regex` pattern searched with a timeout
    sticky: bool
    literal: str = ""
    ignore_case: bool = False
    engine: str = ENGINE_RE2
    python_pattern: str = ""  # the pattern in Python syntax, and its flags: the bounded fallback
    flags: int = 0

    def search(self, haystack: str, lowered: str | None = None) -> Any:
        """Return the match (it has `.start()`) or None; raise RegexTimeout past the time limit."""
        if self.literal:
            if self.ignore_case:
                if self.literal not in (lowered if lowered is not None else haystack.lower()):
                    return None
            elif self.literal not in haystack:
                return None
        pattern = self.pattern
        if self.engine == ENGINE_RE2:
            try:
                return pattern.match(haystack) if self.sticky else pattern.search(haystack)
            except UnicodeEncodeError:  # a lone surrogate: RE2 reads UTF-8 only
                pattern = _backtracking(self.python_pattern, self.flags)
        try:
            if self.sticky:
                return pattern.match(haystack, timeout=REGEX_TIMEOUT)
            return pattern.search(haystack, timeout=REGEX_TIMEOUT)
        except TimeoutError as exc:
            raise RegexTimeout(self.source) from exc


@functools.lru_cache(maxsize=256)
def _backtracking(python_pattern: str, flags: int):
    return regex.compile(python_pattern, flags)


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


def _split_key(key: str) -> tuple[tuple[str, str] | None, str]:
    """Return ((pattern, flags), "") for a well-formed key, (None, why) otherwise ("" = a plain key)."""
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
    return (pattern, flags), ""


def _compile_flags(flags: str) -> int:
    compile_flags = 0
    if "i" in flags:
        compile_flags |= re.IGNORECASE
    if "m" in flags:
        compile_flags |= re.MULTILINE
    if "s" in flags:
        compile_flags |= re.DOTALL
    return compile_flags


def parse_regex_key(key: str) -> tuple[RegexKey | None, str]:
    """Return (compiled key, "") for a valid `/pattern/flags` key, (None, why) otherwise.

    `why` is "" when the key is not regex-shaped at all (a plain key), else the reason a
    regex-shaped key is not a valid one. Mirrors world-info.js `parseRegexFromString`:
    flags g i m s u y; an unescaped `/` inside the pattern makes it invalid. Valid means
    Python's `re` compiles it; the key then runs on RE2 when RE2 can run the same meaning,
    else on the `regex` module with a time limit.
    """
    parts, why = _split_key(key)
    if parts is None:
        return None, why
    pattern, flags = parts
    python_pattern, compile_flags = _js_to_python(pattern), _compile_flags(flags)
    try:
        re.compile(python_pattern, compile_flags)
        tree = parse(python_pattern, compile_flags)
    except re.error as exc:
        return None, f"does not compile: {exc}"
    try:
        compiled, engine = re2.compile(to_re2(tree), _RE2_OPTIONS), ENGINE_RE2
    except (NotRE2, re2.error):
        try:
            compiled, engine = regex.compile(python_pattern, compile_flags), ENGINE_REGEX
        except regex.error as exc:
            return None, f"does not compile: {exc}"
    literal = _required_literal(pattern) if "m" not in flags and "x" not in flags else ""
    if "i" in flags:
        literal = literal.lower()
    return RegexKey(source=key, pattern=compiled, sticky="y" in flags, literal=literal, ignore_case="i" in flags,
                    engine=engine, python_pattern=python_pattern, flags=compile_flags), ""


def regex_key_hazard(key: str) -> str:
    """Why a valid regex key is refused as catastrophic, or "" (also for plain and invalid keys).

    Every key is judged, whichever engine runs it here: the studio runs a key RE2 can take in
    linear time, but the same key is exported to SillyTavern world info and Character Card
    books, whose JavaScript engine backtracks and hangs on it. A key already stored keeps
    running (on RE2, or with the time limit) until the author fixes it.
    """
    compiled, _why = parse_regex_key(key)
    if compiled is None:
        return ""
    (pattern, flags), _why = _split_key(key)
    return hazard(parse(_js_to_python(pattern), _compile_flags(flags)))


def key_errors(keys: Iterable[str]) -> list[str]:
    """Return one message per regex-shaped key that is not a valid regular expression."""
    errors = []
    for key in keys:
        _compiled, why = parse_regex_key(key)
        if why:
            errors.append(f"Key “{key}” looks like a regular expression but {why}.")
    return errors


def key_hazards(keys: Iterable[str]) -> list[str]:
    """Return one message per regex key refused because it may take exponential time."""
    errors = []
    for key in keys:
        why = regex_key_hazard(key)
        if why:
            errors.append(f"Key “{key}” is refused: {why}. A backtracking engine (SillyTavern's, or this "
                          f"studio's for keys RE2 cannot run) can take exponential time on it; rewrite it "
                          f"without the nested or overlapping repeat (for example (a+)+ as a+, (a|aa)+ as a+).")
    return errors
