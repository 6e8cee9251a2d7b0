"""The engine's inputs, state and output: plain dataclasses, no Django.

`LoreSpec` is one entry as the engine sees it (built from a LoreEntry by `spec_from_entry`),
`LoreDefaults` the book-wide settings from Universe_Meta, `ScanMessage` one message of the
scan buffer, `LoreState` what carries from a turn to the next (sticky and cooldown windows,
first matches), `Explanation` / `ActivationResult` what an evaluation returns. Units are
SillyTavern's: windows count messages, a turn is two messages (`message_clock`).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from studio.memory.embeddings.tokens import count_tokens

MAX_SCAN_DEPTH = 1000  # world-info.js MAX_SCAN_DEPTH
DEFAULT_GROUP_WEIGHT = 100  # world-info.js DEFAULT_WEIGHT
MESSAGES_PER_TURN = 2  # a turn is the player's input and the narration

# SelectiveLogic numbers (world-info.js world_info_logic).
AND_ANY, NOT_ALL, NOT_ANY, AND_ALL = 0, 1, 2, 3
LOGIC_NAMES = {AND_ANY: "AND ANY", NOT_ALL: "NOT ALL", NOT_ANY: "NOT ANY", AND_ALL: "AND ALL"}

# Universe_Meta keys holding the book-wide defaults.
META_SCAN_DEPTH = "lore_scan_depth"
META_TOKEN_BUDGET = "lore_token_budget"
META_RECURSION_DEPTH = "lore_recursion_depth"
META_CASE_SENSITIVE = "lore_case_sensitive"
META_MATCH_WHOLE_WORDS = "lore_match_whole_words"
DEFAULT_META_KEYS = (
    META_SCAN_DEPTH,
    META_TOKEN_BUDGET,
    META_RECURSION_DEPTH,
    META_CASE_SENSITIVE,
    META_MATCH_WHOLE_WORDS,
)


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
    if token_count is None:  # not a stored LoreEntry: count as its token_count would be
        token_count = count_tokens(text)
    return LoreSpec(
        entry_id=entry.entry_id,
        title=entry.title,
        text=text,
        keys=tuple(entry.keys or ()),
        token_count=int(token_count),
        **values,
    )


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


def seeded_rng(seed: str, *parts: Any) -> random.Random:
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

        return cls(
            sticky=effects(data.get("sticky")),
            cooldown=effects(data.get("cooldown")),
            first_matched={k: int(v) for k, v in (data.get("first_matched") or {}).items()},
        )


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
    regex_timeouts: list[str] = field(default_factory=list)  # regex keys that ran past their time limit

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
    regex_timeouts: list[str] = field(default_factory=list)  # sources of regex keys past their time limit

    @property
    def activated_ids(self) -> list[str]:
        return [spec.entry_id for spec in self.activated]


def turns_left(effect: TimedEffect, turn: int) -> int:
    """Turns after `turn` during which the window is still open."""
    left, next_turn = 0, turn + 1
    while message_clock(next_turn) < effect.end:
        left += 1
        next_turn += 1
    return left


def turn_of_clock(clock: int) -> int:
    return (clock - 1) // MESSAGES_PER_TURN + 1
