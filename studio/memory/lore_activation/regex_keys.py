"""Regex keys in SillyTavern's `/pattern/flags` form: parse, compile once, validate, run in bounded time.

Mirrors world-info.js `parseRegexFromString`: flags g i m s u y, an unescaped `/` inside the
pattern makes the key invalid; JavaScript named groups are translated. A regex-shaped key
that does not compile is matched as plain text by the engine (as SillyTavern does) and
refused by `key_errors` when an author saves it.

What runs a key (see `regex_safety`): Python's parser fixes the pattern's meaning; when RE2
can run exactly that meaning the key runs on google-re2 (linear time, no limit needed),
otherwise on the `regex` module with `REGEX_TIMEOUT` seconds per search. A search past the
limit raises `RegexTimeout`: the scan buffer counts the key as not matching and the
explanation says so. A `RegexBudget` bounds the `regex`-module time of a whole evaluation
(`REGEX_BUDGET`), or of a replay of many: once spent, the remaining backtracking keys are
not run and count as timed out; a key that ran past its limit is not searched again. A key RE2 cannot run whose shape is known to be catastrophic is named
by `key_hazards`, and every save path refuses it.
"""

from __future__ import annotations

import functools
import re
import string
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import re2
import regex

from studio.memory.lore_activation.regex_safety import NotRE2, hazard, parse, to_re2

REGEX_TIMEOUT = 0.1  # seconds one search of a key the `regex` module runs may take
REGEX_BUDGET = 1.0  # seconds of `regex`-module search one evaluation may spend over all its keys
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

    def search(self, haystack: str, lowered: str | None = None, timeout: float = REGEX_TIMEOUT) -> Any:
        """Return the match (it has `.start()`) or None; raise RegexTimeout past `timeout` seconds."""
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
                return pattern.match(haystack, timeout=timeout)
            return pattern.search(haystack, timeout=timeout)
        except TimeoutError as exc:
            raise RegexTimeout(self.source) from exc


# Why a regex key counted as not matching without a result (`RegexBudget.search`).
TIMED_OUT = "limit"  # its search ran past REGEX_TIMEOUT
OUT_OF_BUDGET = "budget"  # not run (or cut short): the evaluation's regex budget was spent
TIMED_OUT_BEFORE = "earlier"  # not run: it ran past its limit earlier in the same replay


class RegexBudget:
    """The `regex`-module search time left to one evaluation, or to a replay of many.

    Each search of a backtracking key runs with the smaller of REGEX_TIMEOUT and what is
    left, and its time is charged; once the budget is spent the remaining backtracking keys
    are not run. A key that ran past its full limit is remembered in `timed_out` and not
    searched again by anything sharing this budget (Lore health passes one budget to every
    turn of its replay). RE2 keys run in linear time: never charged, never skipped.
    `searches` and `limit_hits` count the backtracking searches run and those that reached
    their limit.
    """

    def __init__(self, seconds: float = REGEX_BUDGET):
        if not seconds > 0:
            raise ValueError(f"a regex budget must be a positive number of seconds, not {seconds!r}")
        self.seconds = float(seconds)
        self.spent = 0.0
        self.searches = 0
        self.limit_hits = 0
        self.timed_out: set[str] = set()

    @property
    def remaining(self) -> float:
        return max(0.0, self.seconds - self.spent)

    def search(self, key: RegexKey, haystack: str, lowered: str | None = None) -> tuple[Any, str]:
        """Return (match or None, "") when the key was searched to the end, else (None, why).

        `why` is TIMED_OUT, OUT_OF_BUDGET or TIMED_OUT_BEFORE; the key then counts as not matching.
        """
        if key.engine == ENGINE_RE2:
            try:
                return key.search(haystack, lowered), ""
            except RegexTimeout:  # the lone-surrogate fallback ran past its limit
                return None, TIMED_OUT
        if key.source in self.timed_out:
            return None, TIMED_OUT_BEFORE
        left = self.remaining
        if left <= 0:
            return None, OUT_OF_BUDGET
        timeout = min(REGEX_TIMEOUT, left)
        self.searches += 1
        started = time.perf_counter()
        try:
            return key.search(haystack, lowered, timeout=timeout), ""
        except RegexTimeout:
            self.limit_hits += 1
            if timeout < REGEX_TIMEOUT:
                return None, OUT_OF_BUDGET
            self.timed_out.add(key.source)
            return None, TIMED_OUT
        finally:
            self.spent += time.perf_counter() - started


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
    rest = pattern[len(run) :]
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
    compiled, why, _hazard = _analyse(key)
    return compiled, why


def regex_key_hazard(key: str) -> str:
    """Why a valid regex key is refused as catastrophic, or "" (also for plain and invalid keys).

    Every key is judged, whichever engine runs it here: the studio runs a key RE2 can take in
    linear time, but the same key is exported to SillyTavern world info and Character Card
    books, whose JavaScript engine backtracks and hangs on it. A key already stored keeps
    running (on RE2, or with the time limit) until the author fixes it.
    """
    return _analyse(key)[2]


@functools.lru_cache(maxsize=4096)
def _analyse(key: str) -> tuple[RegexKey | None, str, str]:
    """(compiled key or None, why it is not a valid regex key, why it is catastrophic) for `key`.

    One parse, translation, compile and hazard check per distinct key, shared by every caller:
    a save validates its keys (`key_errors`, `key_hazards`), an import also notes the keys RE2
    cannot run, and a book rebuilt after one edit compiles its unchanged keys again. A
    RegexKey is immutable, so the cached one is safe to share between books and threads.
    """
    parts, why = _split_key(key)
    if parts is None:
        return None, why, ""
    pattern, flags = parts
    python_pattern, compile_flags = _js_to_python(pattern), _compile_flags(flags)
    try:
        re.compile(python_pattern, compile_flags)
        tree = parse(python_pattern, compile_flags)
    except re.error as exc:
        return None, f"does not compile: {exc}", ""
    try:
        compiled, engine = re2.compile(to_re2(tree), _RE2_OPTIONS), ENGINE_RE2
    except (NotRE2, re2.error):
        try:
            compiled, engine = regex.compile(python_pattern, compile_flags), ENGINE_REGEX
        except regex.error as exc:
            return None, f"does not compile: {exc}", ""
    literal = _required_literal(pattern) if "m" not in flags and "x" not in flags else ""
    if "i" in flags:
        literal = literal.lower()
    return (
        RegexKey(
            source=key,
            pattern=compiled,
            sticky="y" in flags,
            literal=literal,
            ignore_case="i" in flags,
            engine=engine,
            python_pattern=python_pattern,
            flags=compile_flags,
        ),
        "",
        hazard(tree),
    )


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
            errors.append(
                f"Key “{key}” is refused: {why}. A backtracking engine (SillyTavern's, or this "
                f"studio's for keys RE2 cannot run) can take exponential time on it; rewrite it "
                f"without the nested or overlapping repeat (for example (a+)+ as a+, (a|aa)+ as a+)."
            )
    return errors
