"""Lore activation: which Lore Book entries a turn activates, and why (World Info semantics).

A pure module: it reads plain `LoreSpec` dataclasses (built from LoreEntry rows by
`spec_from_entry`), the universe defaults, the scan messages, the turn, the previous
`LoreState` and a seed, and returns an `ActivationResult`. It writes nothing, imports no
Django model, and the same inputs always give the same result.

Semantics follow SillyTavern's `public/scripts/world-info.js` (`checkWorldInfo`,
`WorldInfoBuffer`, `WorldInfoTimedEffects`, `filterByInclusionGroups`) and the Character
Card V3 decorators; docs/authoring.md ("Lore activation") lists every rule with the source
lines it was read from, and each deviation. The units are SillyTavern's: scan depth, sticky,
cooldown and delay count *messages*; a studio turn is two messages (the player's input,
then the narration) and the pending input is the newest message.

Invariants:
- Every entry of the book gets exactly one `Explanation` (included or not, and why).
- Every random draw (probability, inclusion-group weights) comes from a PRNG seeded by
  `sha256(seed, purpose, entry or group, pass)`; `seed` is `activation_seed(save id,
  timeline generation, turn)`, so a replay of the same state repeats every roll.
- Plain keys are matched by ONE Aho-Corasick automaton per book and case mode (built once,
  cached by the book's version key); regex keys are compiled once per book and evaluated on
  the scan buffer. No regex is built per entry per turn.

Failure modes: a key that looks like `/pattern/flags` but does not compile is matched as
plain text, exactly as SillyTavern does (the studio refuses such keys when an author saves
them; imports keep them and the import report and health page name them).
"""
from __future__ import annotations

import hashlib
import json
import random
import re
import string
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import ahocorasick

MAX_SCAN_DEPTH = 1000  # world-info.js MAX_SCAN_DEPTH
DEFAULT_GROUP_WEIGHT = 100  # world-info.js DEFAULT_WEIGHT
MESSAGES_PER_TURN = 2  # a turn is the player's input and the narration
MATCHER = "\x01"  # world-info.js WorldInfoBuffer.get(): every message starts with \x01
JOINER = "\n" + MATCHER
_WORD_CHARS = frozenset(string.ascii_letters + string.digits + "_")  # JavaScript's \w

# SelectiveLogic numbers (world-info.js world_info_logic).
AND_ANY, NOT_ALL, NOT_ANY, AND_ALL = 0, 1, 2, 3
LOGIC_NAMES = {AND_ANY: "AND ANY", NOT_ALL: "NOT ALL", NOT_ANY: "NOT ANY", AND_ALL: "AND ALL"}

# Scan states (world-info.js scan_state).
_NONE, _INITIAL, _RECURSION = 0, 1, 2

# Universe_Meta keys holding the book-wide defaults.
META_SCAN_DEPTH = "lore_scan_depth"
META_TOKEN_BUDGET = "lore_token_budget"
META_RECURSION_DEPTH = "lore_recursion_depth"
META_CASE_SENSITIVE = "lore_case_sensitive"
META_MATCH_WHOLE_WORDS = "lore_match_whole_words"
DEFAULT_META_KEYS = (META_SCAN_DEPTH, META_TOKEN_BUDGET, META_RECURSION_DEPTH, META_CASE_SENSITIVE,
                     META_MATCH_WHOLE_WORDS)


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


# --- inputs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoreDefaults:
    """Book-wide settings (Universe_Meta `lore_*` keys); entries override some of them.

    recursion_depth: passes after the first scan in which activated entries' text may
    activate further entries (0 = no recursion; SillyTavern's "Recursive scan" off).
    token_budget: tokens the activated entries may use (0 = no budget at this stage).
    """

    scan_depth: int = 2
    token_budget: int = 0
    recursion_depth: int = 3
    case_sensitive: bool = False
    match_whole_words: bool = False
    group_scoring: bool = False


def _meta_bool(value: str | None, default: bool) -> bool:
    if value is None or not str(value).strip():
        return default
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def _meta_int(value: str | None, default: int) -> int:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return default


def defaults_from_meta(meta: Mapping[str, str]) -> LoreDefaults:
    """Read the defaults from Universe_Meta values (validated on save by the meta service)."""
    base = LoreDefaults()
    return LoreDefaults(
        scan_depth=_meta_int(meta.get(META_SCAN_DEPTH), base.scan_depth),
        token_budget=_meta_int(meta.get(META_TOKEN_BUDGET), base.token_budget),
        recursion_depth=_meta_int(meta.get(META_RECURSION_DEPTH), base.recursion_depth),
        case_sensitive=_meta_bool(meta.get(META_CASE_SENSITIVE), base.case_sensitive),
        match_whole_words=_meta_bool(meta.get(META_MATCH_WHOLE_WORDS), base.match_whole_words),
    )


@dataclass(frozen=True)
class LoreSpec:
    """What the engine knows of one entry: its text, keys and activation fields."""

    entry_id: str
    title: str = ""
    text: str = ""
    keys: tuple[str, ...] = ()
    secondary_keys: tuple[str, ...] = ()
    selective: bool = True
    selective_logic: int = AND_ANY
    enabled: bool = True
    constant: bool = False
    case_sensitive: bool | None = None
    match_whole_words: bool | None = None
    scan_depth: int | None = None
    insertion_order: int = 100
    priority: int | None = None
    position: int = 0
    depth: int = 4
    role: int | None = None
    probability: int = 100
    use_probability: bool = True
    inclusion_group: str = ""
    group_prioritize: bool = False
    group_weight: int = DEFAULT_GROUP_WEIGHT
    group_scoring: bool | None = None
    sticky: int = 0
    cooldown: int = 0
    delay: int = 0
    exclude_recursion: bool = False
    prevent_recursion: bool = False
    delay_until_recursion: int = 0
    ignore_budget: bool = False
    vectorized: bool = True
    forced: str = ""  # "", "activate", "dont_activate"
    activate_only_after: int = 0
    activate_only_every: int = 0
    after_first_match: str = ""  # "", "keep", "stop"
    additional_keys: tuple[tuple[str, ...], ...] = ()
    exclude_keys: tuple[str, ...] = ()
    ignore_on_max_context: bool = False
    token_count: int = 0

    @property
    def groups(self) -> tuple[str, ...]:
        # world-info.js filterByInclusionGroups: item.group.split(/,\s*/).filter(x => x)
        return tuple(g for g in re.split(r",\s*", self.inclusion_group or "") if g)

    @property
    def version_hash(self) -> str:
        """A digest of the entry: a timed effect set by another version of it does not apply."""
        return hashlib.sha1(json.dumps(self.__dict__, sort_keys=True, default=list).encode()).hexdigest()[:16]


ACTIVATION_ATTRIBUTES = tuple(
    name for name in LoreSpec.__dataclass_fields__ if name not in ("entry_id", "title", "text", "keys", "token_count")
)


def spec_from_entry(entry: Any) -> LoreSpec:
    """Build the engine's view of a LoreEntry (or anything with the same attributes)."""
    values: dict[str, Any] = {}
    for name in ACTIVATION_ATTRIBUTES:
        value = getattr(entry, name, LoreSpec.__dataclass_fields__[name].default)
        if name in ("secondary_keys", "exclude_keys"):
            value = tuple(value or ())
        elif name == "additional_keys":
            value = tuple(tuple(group) for group in value or ())
        values[name] = value
    text = entry.text or ""
    token_count = getattr(entry, "token_count", None)
    if token_count is None:
        token_count = max(1, len(text) // 4) if text else 0
    return LoreSpec(entry_id=entry.entry_id, title=entry.title, text=text, keys=tuple(entry.keys or ()),
                    token_count=int(token_count), **values)


@dataclass(frozen=True)
class ScanMessage:
    """One message of the scan buffer; `turn_id` None is the pending input."""

    text: str
    turn_id: int | None
    source: str  # "pending", "input" or "narrative"

    def describe(self) -> str:
        if self.turn_id is None:
            return "the pending input"
        return f"turn {self.turn_id} ({'player input' if self.source == 'input' else 'narrative'})"


def scan_messages(*, pending_input: str, turns: Sequence[tuple[int, str, str]]) -> list[ScanMessage]:
    """Return the scan buffer newest first: the pending input, then each turn's narrative and input.

    `turns` are (turn_id, player_input, narrative), in any order; pass at least the last
    ceil(max scan depth / 2) turns.
    """
    messages = [ScanMessage(pending_input or "", None, "pending")]
    for turn_id, player_input, narrative in sorted(turns, key=lambda t: t[0], reverse=True):
        messages.append(ScanMessage(narrative or "", turn_id, "narrative"))
        messages.append(ScanMessage(player_input or "", turn_id, "input"))
    return messages


def message_clock(turn: int) -> int:
    """Messages in the chat when turn `turn` is evaluated (SillyTavern's `chat.length`)."""
    return MESSAGES_PER_TURN * (turn - 1) + 1


def activation_seed(*, save_id: str, generation: int, turn: int) -> str:
    return f"{save_id}:{generation}:{turn}"


def _rng(seed: str, *parts: Any) -> random.Random:
    digest = hashlib.sha256("|".join([seed, *map(str, parts)]).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


# --- state ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class TimedEffect:
    """A sticky or cooldown window in message-clock units: active while start <= clock < end."""

    start: int
    end: int
    entry_hash: str
    protected: bool = False


@dataclass
class LoreState:
    """What carries from one turn to the next: timed effects and first matches."""

    sticky: dict[str, TimedEffect] = field(default_factory=dict)
    cooldown: dict[str, TimedEffect] = field(default_factory=dict)
    first_matched: dict[str, int] = field(default_factory=dict)  # entry id -> turn (after_first_match)

    def to_dict(self) -> dict[str, Any]:
        return {
            "sticky": {k: [e.start, e.end, e.entry_hash, e.protected] for k, e in sorted(self.sticky.items())},
            "cooldown": {k: [e.start, e.end, e.entry_hash, e.protected] for k, e in sorted(self.cooldown.items())},
            "first_matched": dict(sorted(self.first_matched.items())),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> LoreState:
        data = data or {}

        def effects(raw) -> dict[str, TimedEffect]:
            return {k: TimedEffect(int(v[0]), int(v[1]), str(v[2]), bool(v[3])) for k, v in (raw or {}).items()}

        return cls(sticky=effects(data.get("sticky")), cooldown=effects(data.get("cooldown")),
                   first_matched={k: int(v) for k, v in (data.get("first_matched") or {}).items()})


# --- output --------------------------------------------------------------------------------


@dataclass(slots=True)
class Explanation:
    """Why one entry is in or out. `code` is stable (for UIs and tests); `reasons` are sentences."""

    entry_id: str
    title: str
    included: bool = False
    code: str = "no_match"
    reasons: list[str] = field(default_factory=list)
    matched_key: str = ""
    matched_in: str = ""
    via_entry: str = ""
    pass_index: int | None = None
    roll: float | None = None
    threshold: float | None = None
    group: str = ""
    rivals: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass
class ActivationResult:
    activated: list[LoreSpec]  # prompt order: insertion order ascending
    sequence: list[str]  # entry ids in the order they activated
    state: LoreState
    explanations: Mapping[str, Explanation]  # every entry of the book (see Explanations)
    passes: int
    turn: int

    @property
    def activated_ids(self) -> list[str]:
        return [spec.entry_id for spec in self.activated]


# --- the compiled book ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Needle:
    text: str  # as searched: lowercased when not case sensitive
    case_sensitive: bool
    whole_word: bool


@dataclass(frozen=True, slots=True)
class _KeyRef:
    raw: str
    needle: int = -1  # index into CompiledBook.needles, or -1
    regex: RegexKey | None = None


def _substitute(text: str, macros: Mapping[str, str]) -> str:
    if not macros or "{{" not in text:
        return text
    return re.sub(r"\{\{(char|user)\}\}", lambda m: macros.get(m.group(1).lower(), m.group(0)), text,
                  flags=re.IGNORECASE)


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
        self.rank = sorted(range(len(self.specs)), key=lambda i: (-self.specs[i].insertion_order, self.specs[i].entry_id))
        self.rank_of = {index: position for position, index in enumerate(self.rank)}
        self.hashes = [spec.version_hash for spec in self.specs]
        self.groups = [spec.groups for spec in self.specs]
        self.needles: list[_Needle] = []
        needle_ids: dict[_Needle, int] = {}
        self.primary: list[tuple[_KeyRef, ...]] = []
        self.secondary: list[tuple[_KeyRef, ...]] = []
        self.additional: list[tuple[tuple[_KeyRef, ...], ...]] = []
        self.exclude: list[tuple[_KeyRef, ...]] = []
        self.invalid_regex: dict[str, list[str]] = {}
        needle_entries: dict[int, set[int]] = {}
        self.regex_entries: set[int] = set()

        def ref(index: int, spec: LoreSpec, raw: str) -> _KeyRef | None:
            key = _substitute(raw, self.macros).strip()
            if not key:
                return None
            compiled, why = parse_regex_key(key)
            if compiled is not None:
                return _KeyRef(raw=raw, regex=compiled)
            if why:
                self.invalid_regex.setdefault(spec.entry_id, []).append(raw)
            case = spec.case_sensitive if spec.case_sensitive is not None else defaults.case_sensitive
            whole = spec.match_whole_words if spec.match_whole_words is not None else defaults.match_whole_words
            # world-info.js matchKeys: whole-word boundaries only for one-word keys.
            needle = _Needle(key if case else key.lower(), bool(case), bool(whole) and len(key.split()) == 1)
            if needle not in needle_ids:
                needle_ids[needle] = len(self.needles)
                self.needles.append(needle)
            return _KeyRef(raw=raw, needle=needle_ids[needle])

        for index, spec in enumerate(self.specs):
            primary = tuple(r for r in (ref(index, spec, k) for k in spec.keys) if r is not None)
            self.primary.append(primary)
            for r in primary:
                if r.regex is not None:
                    self.regex_entries.add(index)
                else:
                    needle_entries.setdefault(r.needle, set()).add(index)
            self.secondary.append(tuple(r for r in (ref(index, spec, k) for k in spec.secondary_keys) if r is not None))
            self.additional.append(tuple(
                tuple(r for r in (ref(index, spec, k) for k in group) if r is not None) for group in spec.additional_keys))
            self.exclude.append(tuple(r for r in (ref(index, spec, k) for k in spec.exclude_keys) if r is not None))
        self.needle_entries = {n: tuple(sorted(e)) for n, e in needle_entries.items()}
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
            i for i, spec in enumerate(self.specs)
            if spec.enabled and (spec.constant or spec.forced or spec.after_first_match or i in self.regex_entries)
        )
        self.delay_levels = sorted({spec.delay_until_recursion for spec in self.specs
                                    if spec.enabled and spec.delay_until_recursion})
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
                        if (start > 0 and haystack[start - 1] in _WORD_CHARS) or (
                                end + 1 < size and haystack[end + 1] in _WORD_CHARS):
                            continue
                    found.add(n)
        return frozenset(found)

    def scan_entry_text(self, index: int) -> frozenset[int]:
        cached = self._text_cache.get(index)
        if cached is None:
            cached = self._scan_uncached(_substitute(self.specs[index].text, self.macros))
            self._text_cache[index] = cached
        return cached


_BOOK_CACHE: OrderedDict[tuple, CompiledBook] = OrderedDict()
_BOOK_CACHE_SIZE = 8
_BOOK_CACHE_LOCK = threading.Lock()


def compiled_book(*, version: str, specs: Sequence[LoreSpec] | None = None, loader=None,
                  defaults: LoreDefaults, macros: Mapping[str, str] | None = None) -> CompiledBook:
    """Return the compiled book for `version`, building it from `specs` (or `loader()`) once.

    `version` must change whenever an entry changes (e.g. the universe id with the newest
    `updated_at` and the entry count); the case and whole-word defaults and the macros are
    part of the cache key because the automaton depends on them.
    """
    key = (version, defaults.case_sensitive, defaults.match_whole_words, tuple(sorted((macros or {}).items())))
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


# --- activation ----------------------------------------------------------------------------


class _Buffer:
    """The scan buffer of one evaluation: messages (newest first) plus recursion text."""

    def __init__(self, book: CompiledBook, messages: Sequence[ScanMessage]):
        self.book = book
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

    def add_recursion(self, indices: Sequence[int]) -> set[int]:
        """Add the entries' text to the buffer; return the needles that are new in the recursion text."""
        texts, new = [], set()
        for index in indices:
            text = _substitute(self.book.specs[index].text, self.book.macros)
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

    def _regex_hit(self, regex: RegexKey, depth: int) -> bool:
        # The chat part once per depth, then each recursion chunk on its own (a chunk is
        # scanned once per evaluation however many entries carry the key).
        key = (id(regex), depth)
        hit = self._regex_hits.get(key)
        if hit is None:
            text = self.joined(depth)
            lowered = self._lowered(depth, text) if regex.ignore_case and regex.literal else None
            hit = self._regex_hits[key] = regex.search(text, lowered) is not None
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
                hit = self._regex_hits[key] = regex.search(text, lowered) is not None
            if hit:
                return True
        return False

    def locate(self, key: _KeyRef, depth: int) -> str | None:
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
        match = regex.search(self.joined(depth))
        if match is None:
            return "the recursion text"
        offset = match.start()
        position = len(MATCHER)
        for message in self.messages[:depth]:
            position += len(message.text) + len(JOINER)
            if offset < position:
                return message.describe()
        return "the scan buffer"

    def beyond_depth(self, key: _KeyRef, depth: int) -> str | None:
        index = self.first_seen.get(key.needle) if key.regex is None else None
        if index is not None and index >= depth:
            return self.messages[index].describe()
        return None


def _turns_left(effect: TimedEffect, turn: int) -> int:
    """Turns after `turn` during which the window is still open."""
    left, next_turn = 0, turn + 1
    while message_clock(next_turn) < effect.end:
        left += 1
        next_turn += 1
    return left


def _turn_of_clock(clock: int) -> int:
    return (clock - 1) // MESSAGES_PER_TURN + 1


def activate(*, book: CompiledBook, messages: Sequence[ScanMessage], turn: int, state: LoreState | None,
             seed: str) -> ActivationResult:
    """Evaluate the book for `turn` (the turn being played) from the state left by the turn before.

    `messages` is the scan buffer newest first (see `scan_messages`); `state` is the state as
    of turn - 1 (None = a fresh save). Return the activated entries, the new state and an
    explanation for every entry.
    """
    specs, defaults = book.specs, book.defaults
    clock = message_clock(turn)
    previous = state or LoreState()
    explanations = _Records(book)
    buffer = _Buffer(book, messages)

    # Timed effects (world-info.js WorldInfoTimedEffects.checkTimedEffects).
    new_state = LoreState(sticky={}, cooldown={}, first_matched=dict(previous.first_matched))
    sticky_now: set[int] = set()
    cooldown_now: set[int] = set()
    for kind, effects, target, active in (("sticky", previous.sticky, new_state.sticky, sticky_now),
                                          ("cooldown", previous.cooldown, new_state.cooldown, cooldown_now)):
        for entry_id, effect in effects.items():
            index = book.by_id.get(entry_id)
            if kind == "cooldown" and entry_id in new_state.cooldown:
                continue  # replaced by the cooldown that the end of its sticky window started
            if clock <= effect.start and not effect.protected:
                continue  # the chat did not advance
            if index is None or book.hashes[index] != effect.entry_hash:
                if clock < effect.end:
                    target[entry_id] = effect  # another version of the entry: kept, not applied
                continue
            spec = specs[index]
            if not getattr(spec, kind):
                continue
            if clock >= effect.end:
                if kind == "sticky" and spec.cooldown:
                    # Sticky ended: the cooldown starts now and already applies (onEnded.sticky).
                    new_state.cooldown[entry_id] = TimedEffect(clock, clock + spec.cooldown, effect.entry_hash, True)
                    cooldown_now.add(index)
                continue
            target[entry_id] = effect
            active.add(index)

    recursive = defaults.recursion_depth > 0
    max_steps = defaults.recursion_depth + 1 if recursive else 0
    levels = list(book.delay_levels)
    current_level = levels.pop(0) if levels else 0
    activated: dict[int, int] = {}  # entry index -> pass
    sequence: list[int] = []
    failed: set[int] = set()
    budget = defaults.token_budget
    used_tokens = 0
    overflowed = False
    scan_state, count = _INITIAL, 0
    assistant_messages = turn - 1  # narrations before this turn (CCv3 "assistant message count")

    def explain(index: int, code: str, reason: str, *, keep: bool = False, **extra) -> None:
        # keep=True adds to why the entry matched (a roll or the budget decided after the match).
        record = explanations[specs[index].entry_id]
        record.code = code
        record.reasons = [*record.reasons, reason] if keep else [reason]
        for name, value in extra.items():
            setattr(record, name, value)

    def depth_of(spec: LoreSpec) -> int:
        depth = spec.scan_depth if spec.scan_depth is not None else defaults.scan_depth
        return min(depth, MAX_SCAN_DEPTH)

    # The buffer only grows, so after the first pass only these can change their outcome:
    # entries with a key in the new recursion text, entries waiting for secondary or
    # additional keys, entries delayed until recursion, and regex entries (in book.always).
    fresh_needles: set[int] = set(buffer.first_seen)
    retry: set[int] = set()
    while scan_state:
        if max_steps and count >= max_steps:
            break
        count += 1
        candidates = set(book.always) | sticky_now | retry
        if count > 1:
            candidates.update(book.delayed)
        for needle in fresh_needles:
            candidates.update(book.needle_entries.get(needle, ()))
        retry = set()
        activated_now: list[int] = []
        for index in sorted(candidates, key=book.rank_of.__getitem__):
            if index in activated or index in failed:
                continue
            spec = specs[index]
            if not spec.enabled:
                continue
            sticky = index in sticky_now
            if spec.delay and clock < spec.delay:
                explain(index, "delay", f"delayed: the chat has {clock - 1} messages before this turn's input, "
                        f"the entry waits for {spec.delay}")
                continue
            if index in cooldown_now and not sticky:
                effect = new_state.cooldown.get(spec.entry_id)
                until = _turn_of_clock(effect.end - 1) + 1 if effect else turn
                explain(index, "cooldown", f"on cooldown until turn {until}")
                continue
            if spec.delay_until_recursion and not sticky:
                if scan_state != _RECURSION:
                    explain(index, "delay_until_recursion", "waits for recursion (delay until recursion)")
                    continue
                if spec.delay_until_recursion > current_level:
                    explain(index, "delay_until_recursion",
                            f"waits for recursion level {spec.delay_until_recursion} (at level {current_level})")
                    continue
            if scan_state == _RECURSION and recursive and spec.exclude_recursion and not sticky:
                explain(index, "exclude_recursion", "not activated by other entries (exclude recursion)")
                continue
            if spec.forced == "activate":
                explain(index, "forced", "@@activate")
                activated_now.append(index)
                continue
            if spec.forced == "dont_activate":
                explain(index, "forced_off", "@@dont_activate")
                continue
            matched_turn = previous.first_matched.get(spec.entry_id)
            if spec.after_first_match == "stop" and matched_turn is not None:
                explain(index, "after_first_match", f"already matched at turn {matched_turn} (@@dont_activate_after_match)")
                continue
            if spec.after_first_match == "keep" and matched_turn is not None:
                explain(index, "after_first_match", f"matched at turn {matched_turn}; stays active (@@keep_activate_after_match)")
                activated_now.append(index)
                continue
            if spec.activate_only_after and assistant_messages < spec.activate_only_after:
                explain(index, "activate_only_after", f"only after {spec.activate_only_after} narrations "
                        f"(@@activate_only_after); {assistant_messages} so far")
                continue
            if spec.activate_only_every and assistant_messages % spec.activate_only_every:
                explain(index, "activate_only_every", f"only every {spec.activate_only_every} narrations "
                        f"(@@activate_only_every); {assistant_messages} so far")
                continue
            if spec.constant:
                explain(index, "constant", "constant")
                activated_now.append(index)
                continue
            if sticky:
                effect = new_state.sticky[spec.entry_id]
                explain(index, "sticky", f"sticky since turn {_turn_of_clock(effect.start)} "
                        f"({_turns_left(effect, turn)} more turn(s) after this one)")
                activated_now.append(index)
                continue
            primary = book.primary[index]
            if not primary:
                explain(index, "no_keys", "has no keys")
                continue
            depth = depth_of(spec)
            hit = None
            for key in primary:
                where = buffer.locate(key, depth)
                if where is not None:
                    hit = (key, where)
                    break
            if hit is None:
                deeper = next(((k, w) for k in primary if (w := buffer.beyond_depth(k, depth))), None)
                if depth <= 0:
                    explain(index, "no_match", "scan depth 0: keys are not scanned")
                elif deeper:
                    explain(index, "beyond_scan_depth", f"key “{deeper[0].raw}” appears only in {deeper[1]}, "
                            f"beyond the scan depth of {depth} message(s)")
                else:
                    explain(index, "no_match", f"no key matched in the last {depth} message(s)")
                continue
            key, where = hit
            via = ""
            if "(recursion)" in where:
                via = specs[buffer.recursion_seen[key.needle]].entry_id
            reasons = [f"matched key “{key.raw}” in {where}"]
            secondary = book.secondary[index]
            if spec.selective and secondary:
                found = [k.raw for k in secondary if buffer.locate(k, depth) is not None]
                logic = spec.selective_logic
                ok = {AND_ANY: bool(found), NOT_ALL: len(found) < len(secondary), NOT_ANY: not found,
                      AND_ALL: len(found) == len(secondary)}.get(logic, bool(found))
                shown = ", ".join(f"“{k}”" for k in found) or "none"
                if not ok:
                    if logic in (AND_ANY, AND_ALL):
                        retry.add(index)  # more text may bring the secondary keys
                    explain(index, "secondary", f"matched key “{key.raw}” in {where}, but secondary logic "
                            f"{LOGIC_NAMES.get(logic, logic)} failed (secondary keys present: {shown})",
                            matched_key=key.raw, matched_in=where)
                    continue
                reasons.append(f"secondary logic {LOGIC_NAMES.get(logic, logic)} holds (present: {shown})")
            missing_group = next((group for group in book.additional[index]
                                  if group and not any(buffer.locate(k, depth) for k in group)), None)
            if missing_group is not None:
                retry.add(index)
                explain(index, "additional_keys", f"matched key “{key.raw}”, but none of the @@additional_keys "
                        f"{', '.join(k.raw for k in missing_group)} appears", matched_key=key.raw, matched_in=where)
                continue
            excluded = next((k for k in book.exclude[index] if buffer.locate(k, depth)), None)
            if excluded is not None:
                explain(index, "exclude_keys", f"matched key “{key.raw}”, but @@exclude_keys “{excluded.raw}” appears",
                        matched_key=key.raw, matched_in=where)
                continue
            record = explanations[spec.entry_id]
            record.code = "recursion" if via else "key"
            record.reasons = reasons
            record.matched_key, record.matched_in, record.via_entry = key.raw, where, via
            activated_now.append(index)

        # world-info.js: sticky first, then the book order.
        new_entries = sorted(activated_now, key=lambda i: (i not in sticky_now, book.rank_of[i]))
        new_entries = _filter_groups(book, new_entries, activated, sticky_now, buffer, depth_of, seed, count,
                                     explanations)

        if any(specs[i].priority is not None for i in new_entries):
            new_entries.sort(key=lambda i: (i not in sticky_now, -(specs[i].priority if specs[i].priority is not None
                                                                     else specs[i].insertion_order), book.rank_of[i]))
        new_entries.sort(key=lambda i: specs[i].ignore_on_max_context)  # trimmed first when over budget
        accepted: list[int] = []
        for index in new_entries:
            spec = specs[index]
            if spec.use_probability and spec.probability != 100 and index not in sticky_now:
                roll = _rng(seed, "probability", spec.entry_id).random() * 100
                record = explanations[spec.entry_id]
                record.roll, record.threshold = round(roll, 3), spec.probability
                if not roll <= spec.probability:
                    failed.add(index)
                    explain(index, "probability", f"probability roll {roll:.1f} > {spec.probability}%", keep=True)
                    continue
                record.reasons.append(f"probability roll {roll:.1f} ≤ {spec.probability}%")
            if budget > 0 and not spec.ignore_budget:
                if overflowed or used_tokens + spec.token_count >= budget:
                    overflowed = True
                    explain(index, "budget", f"left out: the lore budget of {budget} tokens is reached "
                            f"({used_tokens} used, this entry needs {spec.token_count})", keep=True)
                    continue
                used_tokens += spec.token_count
            elif spec.ignore_budget and budget > 0:
                explanations[spec.entry_id].reasons.append("ignores the budget")
            activated[index] = count
            sequence.append(index)
            accepted.append(index)
            record = explanations[spec.entry_id]
            record.included, record.pass_index = True, count

        for_recursion = [i for i in accepted if not specs[i].prevent_recursion]
        next_state = _NONE
        if recursive and not overflowed and for_recursion:
            next_state = _RECURSION
        if next_state == _NONE and levels:
            next_state = _RECURSION
            current_level = levels.pop(0)
        scan_state = next_state
        fresh_needles = buffer.add_recursion(for_recursion) if scan_state else set()

    # Timed effects start for what activated (world-info.js setTimedEffects).
    for index in sequence:
        spec = specs[index]
        if spec.sticky and spec.entry_id not in new_state.sticky:
            new_state.sticky[spec.entry_id] = TimedEffect(clock, clock + spec.sticky, book.hashes[index])
        if spec.cooldown and spec.entry_id not in new_state.cooldown:
            new_state.cooldown[spec.entry_id] = TimedEffect(clock, clock + spec.cooldown, book.hashes[index])
        if spec.after_first_match and spec.entry_id not in new_state.first_matched:
            new_state.first_matched[spec.entry_id] = turn

    cooldown_ids = {specs[i].entry_id for i in cooldown_now}
    seen_needles = set(buffer.first_seen)

    def untouched(index: int) -> Explanation:
        """Why an entry the evaluation never looked at is out (built when someone asks)."""
        spec = specs[index]
        record = Explanation(spec.entry_id, spec.title)
        depth = depth_of(spec)
        if not spec.enabled:
            record.code, record.reasons = "disabled", ["disabled"]
        elif spec.entry_id in cooldown_ids:
            record.code, record.reasons = "cooldown", ["on cooldown"]
        elif spec.delay and clock < spec.delay:
            record.code, record.reasons = "delay", [f"delayed until the chat has {spec.delay} messages"]
        elif not book.primary[index]:
            record.code, record.reasons = "no_keys", ["has no keys"]
        elif depth <= 0:
            record.reasons = ["scan depth 0: keys are not scanned"]
        else:
            deeper = next(((k, w) for k in book.primary[index] if k.needle in seen_needles
                           and (w := buffer.beyond_depth(k, depth))), None)
            if deeper:
                record.code = "beyond_scan_depth"
                record.reasons = [f"key “{deeper[0].raw}” appears only in {deeper[1]}, beyond the scan depth of "
                                  f"{depth} message(s)"]
            else:
                record.reasons = [f"no key matched in the last {depth} message(s)"]
        return record

    prompt_order = sorted(sequence, key=lambda i: (specs[i].insertion_order, specs[i].entry_id))
    return ActivationResult(
        activated=[specs[i] for i in prompt_order], sequence=[specs[i].entry_id for i in sequence],
        state=new_state, explanations=Explanations(book, explanations.records, untouched), passes=count, turn=turn,
    )


class _Records:
    """The explanations an evaluation writes, created on first use (most entries need none)."""

    def __init__(self, book: CompiledBook):
        self.book = book
        self.records: dict[str, Explanation] = {}

    def __getitem__(self, entry_id: str) -> Explanation:
        record = self.records.get(entry_id)
        if record is None:
            spec = self.book.specs[self.book.by_id[entry_id]]
            record = self.records[entry_id] = Explanation(entry_id, spec.title)
        return record


class Explanations(Mapping):
    """Entry id -> Explanation for EVERY entry of the book, in book order.

    Entries the evaluation decided about carry their record; the others (no key in the
    buffer, disabled, ...) get theirs built on first access, so a turn does not pay for
    5,000 records nobody reads.
    """

    def __init__(self, book: CompiledBook, records: dict[str, Explanation], untouched):
        self._book = book
        self._records = records
        self._untouched = untouched

    def __getitem__(self, entry_id: str) -> Explanation:
        record = self._records.get(entry_id)
        if record is None:
            index = self._book.by_id[entry_id]  # KeyError for an id not in the book
            record = self._records[entry_id] = self._untouched(index)
        return record

    def __iter__(self):
        return (spec.entry_id for spec in self._book.specs)

    def __len__(self) -> int:
        return len(self._book.specs)


def _filter_groups(book: CompiledBook, new_entries: list[int], activated: Mapping[int, int], sticky_now: set[int],
                   buffer: _Buffer, depth_of, seed: str, pass_index: int,
                   explanations) -> list[int]:
    """Keep one entry per inclusion group (world-info.js filterByInclusionGroups)."""
    specs = book.specs
    grouped: dict[str, list[int]] = {}
    for index in new_entries:
        for group in book.groups[index]:
            grouped.setdefault(group, []).append(index)
    if not grouped:
        return new_entries
    won_earlier: dict[str, list[int]] = {}
    for index in activated:
        for group in book.groups[index]:
            if group in grouped:
                won_earlier.setdefault(group, []).append(index)
    removed: set[int] = set()

    def lose(index: int, group: str, reason: str, rivals: list[int]) -> None:
        if index in removed:
            return
        removed.add(index)
        record = explanations[specs[index].entry_id]
        record.code = "group"
        record.reasons.append(reason)
        record.group, record.rivals = group, [specs[r].entry_id for r in rivals]

    has_sticky: dict[str, bool] = {}
    for group, members in grouped.items():
        stickies = [m for m in members if m in sticky_now]
        has_sticky[group] = bool(stickies)
        for m in members:
            if stickies and m not in stickies:
                lose(m, group, f"lost inclusion group “{group}” to sticky “{specs[stickies[0]].title}”", stickies)
    scoring_default = book.defaults.group_scoring
    for group, members in grouped.items():
        live = [m for m in members if m not in removed]
        if has_sticky[group] or not (scoring_default or any(specs[m].group_scoring for m in live)):
            continue
        scores = {m: _score(book, m, buffer, depth_of(specs[m])) for m in live}
        best = max(scores.values(), default=0)
        for m in live:
            scored = specs[m].group_scoring if specs[m].group_scoring is not None else scoring_default
            if scored and scores[m] < best:
                winners = [w for w in live if scores[w] == best]
                lose(m, group, f"lost inclusion group “{group}” on key score ({scores[m]} < {best})", winners)
    for group, members in grouped.items():
        live = [m for m in members if m not in removed]
        if has_sticky[group]:
            continue
        earlier = won_earlier.get(group, [])
        if earlier:
            for m in live:
                lose(m, group, f"lost inclusion group “{group}”: “{specs[earlier[0]].title}” already won it", earlier)
            continue
        if len(live) <= 1:
            continue
        prioritized = sorted((m for m in live if specs[m].group_prioritize), key=lambda m: -specs[m].insertion_order)
        if prioritized:
            winner = prioritized[0]
            how = f"won inclusion group “{group}” by priority (highest order {specs[winner].insertion_order})"
        else:
            total = sum(specs[m].group_weight for m in live)
            roll = _rng(seed, "group", group, pass_index).random() * total
            cumulative, winner = 0, None
            for m in live:
                cumulative += specs[m].group_weight
                if roll <= cumulative:
                    winner = m
                    break
            if winner is None:
                continue
            how = (f"won inclusion group “{group}” by weighted draw ({roll:.1f} of {total}, "
                   f"weight {specs[winner].group_weight})")
        rivals = [m for m in live if m != winner]
        for m in rivals:
            lose(m, group, f"lost inclusion group “{group}” to “{specs[winner].title}”", [winner])
        record = explanations[specs[winner].entry_id]
        record.reasons.append(how + " against " + ", ".join(f"“{specs[r].title}”" for r in rivals))
        record.group, record.rivals = group, [specs[r].entry_id for r in rivals]
    return [i for i in new_entries if i not in removed]


def _score(book: CompiledBook, index: int, buffer: _Buffer, depth: int) -> int:
    """Count matching keys (world-info.js WorldInfoBuffer.getScore)."""
    spec = book.specs[index]
    primary = sum(1 for k in book.primary[index] if buffer.locate(k, depth))
    if not book.primary[index]:
        return 0
    secondary_keys = book.secondary[index]
    if secondary_keys:
        secondary = sum(1 for k in secondary_keys if buffer.locate(k, depth))
        if spec.selective_logic == AND_ANY:
            return primary + secondary
        if spec.selective_logic == AND_ALL:
            return primary + secondary if secondary == len(secondary_keys) else primary
    return primary
