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
them; imports keep them and the import report and health page name them). Regex keys run
in bounded time (`regex_keys`, `regex_safety`): on RE2 when RE2 can run the pattern's exact
meaning, else on the `regex` module with `REGEX_TIMEOUT` per search and `REGEX_BUDGET` per
evaluation over all such keys (`RegexBudget`, which a replay shares between its turns); a
key past either counts as not matching and its explanation (`regex_timeouts`) says so. A key RE2 cannot
run whose shape is known to be catastrophic is refused by every save path (`key_hazards`).

The package, by subject: `spec` (inputs, state, output dataclasses), `regex_keys`
(`/pattern/flags` keys), `regex_safety` (what RE2 can run; catastrophic shapes), `matcher` (the compiled book and the scan buffer), `groups`
(inclusion groups), `engine` (`activate`), `explain` (the per-entry explanations). Callers
import the public names from here.
"""

from __future__ import annotations

from studio.memory.lore_activation.engine import activate
from studio.memory.lore_activation.explain import Explanations
from studio.memory.lore_activation.matcher import JOINER, MATCHER, CompiledBook, compiled_book
from studio.memory.lore_activation.regex_keys import (
    ENGINE_RE2,
    ENGINE_REGEX,
    OUT_OF_BUDGET,
    REGEX_BUDGET,
    REGEX_TIMEOUT,
    TIMED_OUT,
    TIMED_OUT_BEFORE,
    RegexBudget,
    RegexKey,
    RegexTimeout,
    key_errors,
    key_hazards,
    parse_regex_key,
    regex_key_hazard,
)
from studio.memory.lore_activation.spec import (
    ACTIVATION_ATTRIBUTES,
    AND_ALL,
    AND_ANY,
    DEFAULT_GROUP_WEIGHT,
    DEFAULT_META_KEYS,
    LOGIC_NAMES,
    MAX_SCAN_DEPTH,
    MESSAGES_PER_TURN,
    META_CASE_SENSITIVE,
    META_MATCH_WHOLE_WORDS,
    META_RECURSION_DEPTH,
    META_SCAN_DEPTH,
    META_TOKEN_BUDGET,
    NOT_ALL,
    NOT_ANY,
    ActivationResult,
    Explanation,
    LoreDefaults,
    LoreSpec,
    LoreState,
    ScanMessage,
    TimedEffect,
    activation_seed,
    defaults_from_meta,
    message_clock,
    scan_messages,
    spec_from_entry,
)

__all__ = [
    "ACTIVATION_ATTRIBUTES",
    "AND_ALL",
    "AND_ANY",
    "DEFAULT_GROUP_WEIGHT",
    "DEFAULT_META_KEYS",
    "ENGINE_RE2",
    "ENGINE_REGEX",
    "JOINER",
    "OUT_OF_BUDGET",
    "REGEX_BUDGET",
    "REGEX_TIMEOUT",
    "RegexBudget",
    "RegexTimeout",
    "TIMED_OUT",
    "TIMED_OUT_BEFORE",
    "key_hazards",
    "regex_key_hazard",
    "LOGIC_NAMES",
    "MATCHER",
    "MAX_SCAN_DEPTH",
    "MESSAGES_PER_TURN",
    "META_CASE_SENSITIVE",
    "META_MATCH_WHOLE_WORDS",
    "META_RECURSION_DEPTH",
    "META_SCAN_DEPTH",
    "META_TOKEN_BUDGET",
    "NOT_ALL",
    "NOT_ANY",
    "ActivationResult",
    "CompiledBook",
    "Explanation",
    "Explanations",
    "LoreDefaults",
    "LoreSpec",
    "LoreState",
    "RegexKey",
    "ScanMessage",
    "TimedEffect",
    "activate",
    "activation_seed",
    "compiled_book",
    "defaults_from_meta",
    "key_errors",
    "message_clock",
    "parse_regex_key",
    "scan_messages",
    "spec_from_entry",
]
