"""The compiled book and the scan buffer: one Aho-Corasick automaton per book and case mode.

`CompiledBook` holds every plain key of the book in one automaton per case mode (built once
per book version, cached by `compiled_book`), the regex keys compiled once, and the
per-entry key references. `ScanBuffer` is one evaluation's view of the scan messages plus
the recursion text: `locate(key, depth)` says where a key matches, in words an explanation
can use ("turn 3 (narrative)", "the pending input", "the text of X (recursion)").
"""

from __future__ import annotations

import re
import string
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import ahocorasick

from studio.memory.lore_activation.regex_keys import RegexBudget, RegexKey, parse_regex_key
from studio.memory.lore_activation.spec import MAX_SCAN_DEPTH, LoreDefaults, LoreSpec, ScanMessage

MATCHER = "\x01"  # world-info.js WorldInfoBuffer.get(): every message starts with \x01
JOINER = "\n" + MATCHER
WORD_CHARS = frozenset(string.ascii_letters + string.digits + "_")  # JavaScript's \w


# --- the compiled book ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Needle:
    text: str  # as searched: lowercased when not case sensitive
    case_sensitive: bool
    whole_word: bool


@dataclass(frozen=True, slots=True)
class KeyRef:
    raw: str
    needle: int = -1  # index into CompiledBook.needles, or -1
    regex: RegexKey | None = None


def substitute_macros(text: str, macros: Mapping[str, str]) -> str:
    if not macros or "{{" not in text:
        return text
    return re.sub(
        r"\{\{(char|user)\}\}", lambda m: macros.get(m.group(1).lower(), m.group(0)), text, flags=re.IGNORECASE
    )


class CompiledBook:
    """A book ready to scan: one automaton per case mode over every plain key, compiled regexes.

    Build it once per book version (`compiled_book`); scanning a message caches its matches,
    so consecutive turns re-scan only the messages they have not seen.
    """

    MESSAGE_CACHE_SIZE = 4096

    def __init__(self, specs: Sequence[LoreSpec], defaults: LoreDefaults, macros: Mapping[str, str] | None = None):
        self.specs = tuple(specs)
        self.defaults = defaults
        self.macros = dict(macros or {})
        self.by_id = {spec.entry_id: i for i, spec in enumerate(self.specs)}
        # world-info.js getSortedEntries: sortFn = b.order - a.order (ties keep the book's order).
        self.rank = sorted(
            range(len(self.specs)), key=lambda i: (-self.specs[i].insertion_order, self.specs[i].entry_id)
        )
        self.rank_of = {index: position for position, index in enumerate(self.rank)}
        self.hashes = [spec.version_hash for spec in self.specs]
        self.groups = [spec.groups for spec in self.specs]
        self.needles: list[Needle] = []
        needle_ids: dict[Needle, int] = {}
        self.primary: list[tuple[KeyRef, ...]] = []
        self.secondary: list[tuple[KeyRef, ...]] = []
        self.additional: list[tuple[tuple[KeyRef, ...], ...]] = []
        self.exclude: list[tuple[KeyRef, ...]] = []
        self.invalid_regex: dict[str, list[str]] = {}
        needle_entries: dict[int, set[int]] = {}
        self.regex_entries: set[int] = set()

        def ref(index: int, spec: LoreSpec, raw: str) -> KeyRef | None:
            key = substitute_macros(raw, self.macros).strip()
            if not key:
                return None
            compiled, why = parse_regex_key(key)
            if compiled is not None:
                return KeyRef(raw=raw, regex=compiled)
            if why:
                self.invalid_regex.setdefault(spec.entry_id, []).append(raw)
            case = spec.case_sensitive if spec.case_sensitive is not None else defaults.case_sensitive
            whole = spec.match_whole_words if spec.match_whole_words is not None else defaults.match_whole_words
            # world-info.js matchKeys: whole-word boundaries only for one-word keys.
            needle = Needle(key if case else key.lower(), bool(case), bool(whole) and len(key.split()) == 1)
            if needle not in needle_ids:
                needle_ids[needle] = len(self.needles)
                self.needles.append(needle)
            return KeyRef(raw=raw, needle=needle_ids[needle])

        for index, spec in enumerate(self.specs):
            primary = tuple(r for r in (ref(index, spec, k) for k in spec.keys) if r is not None)
            self.primary.append(primary)
            for r in primary:
                if r.regex is not None:
                    self.regex_entries.add(index)
                else:
                    needle_entries.setdefault(r.needle, set()).add(index)
            self.secondary.append(tuple(r for r in (ref(index, spec, k) for k in spec.secondary_keys) if r is not None))
            self.additional.append(
                tuple(
                    tuple(r for r in (ref(index, spec, k) for k in group) if r is not None)
                    for group in spec.additional_keys
                )
            )
            self.exclude.append(tuple(r for r in (ref(index, spec, k) for k in spec.exclude_keys) if r is not None))
        self.needle_entries = {n: tuple(sorted(e)) for n, e in needle_entries.items()}
        # Entry index -> its regex keys of every kind (for the regex keys that ran out of time).
        self.regex_refs: dict[int, tuple[KeyRef, ...]] = {}
        for index in range(len(self.specs)):
            refs = (
                *self.primary[index],
                *self.secondary[index],
                *(r for g in self.additional[index] for r in g),
                *self.exclude[index],
            )
            regex_refs = tuple(r for r in refs if r.regex is not None)
            if regex_refs:
                self.regex_refs[index] = regex_refs
        self.automata: dict[bool, Any] = {}
        for case in (False, True):
            words: dict[str, list[int]] = {}
            for n, needle in enumerate(self.needles):
                if needle.case_sensitive == case:
                    words.setdefault(needle.text, []).append(n)
            if words:
                automaton = ahocorasick.Automaton()
                for text, ids in words.items():
                    automaton.add_word(text, (len(text), tuple(ids)))
                automaton.make_automaton()
                self.automata[case] = automaton
        self.always = tuple(
            i
            for i, spec in enumerate(self.specs)
            if spec.enabled and (spec.constant or spec.forced or spec.after_first_match or i in self.regex_entries)
        )
        self.delay_levels = sorted(
            {spec.delay_until_recursion for spec in self.specs if spec.enabled and spec.delay_until_recursion}
        )
        self.delayed = tuple(i for i, spec in enumerate(self.specs) if spec.enabled and spec.delay_until_recursion)
        self._message_cache: OrderedDict[str, frozenset[int]] = OrderedDict()
        self._text_cache: dict[int, frozenset[int]] = {}
        self._lock = threading.Lock()

    def scan(self, text: str) -> frozenset[int]:
        """Return the ids of the needles that occur in `text` (whole-word needles at word bounds)."""
        with self._lock:
            cached = self._message_cache.get(text)
            if cached is not None:
                self._message_cache.move_to_end(text)
                return cached
        found = self._scan_uncached(text)
        with self._lock:
            self._message_cache[text] = found
            if len(self._message_cache) > self.MESSAGE_CACHE_SIZE:
                self._message_cache.popitem(last=False)
        return found

    def _scan_uncached(self, text: str) -> frozenset[int]:
        found: set[int] = set()
        needles = self.needles
        for case, automaton in self.automata.items():
            haystack = text if case else text.lower()
            size = len(haystack)
            for end, (length, ids) in automaton.iter(haystack):
                for n in ids:
                    if n in found:
                        continue
                    if needles[n].whole_word:
                        start = end - length + 1
                        if (start > 0 and haystack[start - 1] in WORD_CHARS) or (
                            end + 1 < size and haystack[end + 1] in WORD_CHARS
                        ):
                            continue
                    found.add(n)
        return frozenset(found)

    def scan_entry_text(self, index: int) -> frozenset[int]:
        cached = self._text_cache.get(index)
        if cached is None:
            cached = self._scan_uncached(substitute_macros(self.specs[index].text, self.macros))
            self._text_cache[index] = cached
        return cached


_BOOK_CACHE: OrderedDict[tuple, CompiledBook] = OrderedDict()
_BOOK_CACHE_SIZE = 8
_BOOK_CACHE_LOCK = threading.Lock()


def compiled_book(
    *,
    version: str,
    specs: Sequence[LoreSpec] | None = None,
    loader=None,
    defaults: LoreDefaults,
    macros: Mapping[str, str] | None = None,
) -> CompiledBook:
    """Return the compiled book for `version`, building it from `specs` (or `loader()`) once.

    `version` must change whenever an entry changes (e.g. the universe id with the newest
    `updated_at` and the entry count); every default (scan depth, recursion depth, token
    budget, case and whole words) and the macros are part of the cache key, because the
    book carries the defaults an evaluation uses and the automaton depends on some of them.
    """
    key = (version, defaults, tuple(sorted((macros or {}).items())))
    with _BOOK_CACHE_LOCK:
        book = _BOOK_CACHE.get(key)
        if book is not None:
            _BOOK_CACHE.move_to_end(key)
            return book
    book = CompiledBook(specs if specs is not None else loader(), defaults, macros)
    with _BOOK_CACHE_LOCK:
        _BOOK_CACHE[key] = book
        while len(_BOOK_CACHE) > _BOOK_CACHE_SIZE:
            _BOOK_CACHE.popitem(last=False)
    return book


class ScanBuffer:
    """The scan buffer of one evaluation: messages (newest first) plus recursion text.

    `budget` bounds the time its backtracking regex keys may take (a fresh `RegexBudget` of
    REGEX_BUDGET seconds by default; a replay passes one budget to every turn).
    """

    def __init__(self, book: CompiledBook, messages: Sequence[ScanMessage], budget: RegexBudget | None = None):
        self.book = book
        self.budget = budget if budget is not None else RegexBudget()
        self.messages = [replace(m, text=(m.text or "").strip()) for m in messages[:MAX_SCAN_DEPTH]]
        self.first_seen: dict[int, int] = {}  # needle -> newest message index holding it
        for index, message in enumerate(self.messages):
            for n in book.scan(message.text):
                self.first_seen.setdefault(n, index)
        self.recursion_seen: dict[int, int] = {}  # needle -> entry index whose text holds it
        self.recursion_chunks: list[str] = []
        self._joined: dict[int, str] = {}
        self._regex_hits: dict[tuple[int, int], bool] = {}  # (regex id, depth or -1 - chunk) -> hit
        self._lowered_cache: dict[int, str] = {}
        # Regex keys that got no answer: past their time limit, or not run once the budget was
        # spent or after a timeout earlier in the replay. Not matching for the rest of the
        # evaluation. Key source -> why (regex_keys.TIMED_OUT, OUT_OF_BUDGET, TIMED_OUT_BEFORE).
        self.timed_out: dict[str, str] = {}

    def add_recursion(self, indices: Sequence[int]) -> set[int]:
        """Add the entries' text to the buffer; return the needles that are new in the recursion text."""
        texts, new = [], set()
        for index in indices:
            text = substitute_macros(self.book.specs[index].text, self.book.macros)
            if not text:
                continue
            texts.append(text)
            for n in self.book.scan_entry_text(index):
                if n not in self.recursion_seen:
                    self.recursion_seen[n] = index
                    new.add(n)
        if texts:
            self.recursion_chunks.append("\n".join(texts))
        return new

    def joined(self, depth: int) -> str:
        text = self._joined.get(depth)
        if text is None:
            text = MATCHER + JOINER.join(m.text for m in self.messages[:depth])
            self._joined[depth] = text
        return text

    def _lowered(self, key: Any, text: str) -> str:
        lowered = self._lowered_cache.get(key)
        if lowered is None:
            lowered = self._lowered_cache[key] = text.lower()
        return lowered

    def _search(self, regex: RegexKey, text: str, lowered: str | None):
        """The key's match in `text`, or None; None also once the key got no answer in time."""
        if regex.source in self.timed_out:
            return None
        match, why = self.budget.search(regex, text, lowered)
        if why:
            self.timed_out[regex.source] = why
        return match

    def _regex_hit(self, regex: RegexKey, depth: int) -> bool:
        # The chat part once per depth, then each recursion chunk on its own (a chunk is
        # scanned once per evaluation however many entries carry the key).
        key = (id(regex), depth)
        hit = self._regex_hits.get(key)
        if hit is None:
            text = self.joined(depth)
            lowered = self._lowered(depth, text) if regex.ignore_case and regex.literal else None
            hit = self._regex_hits[key] = self._search(regex, text, lowered) is not None
        if hit:
            return True
        if regex.sticky:
            return False  # flag y: only the start of the buffer, which is the chat part
        for index, chunk in enumerate(self.recursion_chunks):
            key = (id(regex), -1 - index)
            hit = self._regex_hits.get(key)
            if hit is None:
                text = MATCHER + chunk
                lowered = self._lowered(-1 - index, text) if regex.ignore_case and regex.literal else None
                hit = self._regex_hits[key] = self._search(regex, text, lowered) is not None
            if hit:
                return True
        return False

    def locate(self, key: KeyRef, depth: int) -> str | None:
        """Return where `key` matches within `depth` messages or the recursion text, or None."""
        if depth <= 0:
            return None  # world-info.js WorldInfoBuffer.get(): depth <= start depth scans nothing
        if key.regex is not None:
            return self._regex_where(key.regex, depth) if self._regex_hit(key.regex, depth) else None
        index = self.first_seen.get(key.needle)
        if index is not None and index < depth:
            return self.messages[index].describe()
        source = self.recursion_seen.get(key.needle)
        if source is not None:
            return f"the text of “{self.book.specs[source].title}” (recursion)"
        return None

    def _regex_where(self, regex: RegexKey, depth: int) -> str:
        match = self._search(regex, self.joined(depth), None)
        if match is None:
            return "the recursion text"
        offset = match.start()
        position = len(MATCHER)
        for message in self.messages[:depth]:
            position += len(message.text) + len(JOINER)
            if offset < position:
                return message.describe()
        return "the scan buffer"

    def beyond_depth(self, key: KeyRef, depth: int) -> str | None:
        index = self.first_seen.get(key.needle) if key.regex is None else None
        if index is not None and index >= depth:
            return self.messages[index].describe()
        return None
