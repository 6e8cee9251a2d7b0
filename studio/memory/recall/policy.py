"""The memory context's knobs: one declaration, one typed frozen policy built once per context.

Every number or switch that shapes what the narrator reads is a `Knob` in `KNOBS`: its field
on `ContextPolicy`, its default and the measurement (or reason) that chose it, and, for the
ones an author may set per universe, its Universe_Meta key, bounds and the Metadata page's
help. Three readers share the declaration and nothing else restates it:

- `context_policy(universe_meta, ...)` builds the `ContextPolicy` a context is assembled with
  (`studio.memory.recall.context.next_turn_context`), once: the universe's values where they
  are valid, else the defaults; the request's own values (budget, k's, point of view) on top;
- `knob_validate(key, value)` is the Metadata page's (and the importers') check of a value
  (`universes.services.meta_validate` calls it for every key in `META_KNOBS`);
- `universes.meta_keys` lists the keys with their help and default for the Metadata page.

Invariants: a `ContextPolicy` is frozen (a layer cannot change a knob for the layers after
it); a value out of its bounds in Universe_Meta (written before a bound existed, or by hand)
is ignored for the default, never half-applied; the reserve kept for recall never exceeds
the cap on what changes with each action (a floor above the ceiling could not be kept).
Pure: no Django, no database.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any, Mapping

from studio.memory.recall.query_params import DEFAULT_K_LORE, DEFAULT_K_NARRATIVE, DEFAULT_TOKEN_BUDGET, LIMITS

__all__ = [
    "BUDGET_GROUP",
    "ContextPolicy",
    "DEFAULT_CONTEXT_BUDGET",
    "DEFAULT_POLICY",
    "KNOBS",
    "Knob",
    "LAYOUT_GROUP",
    "META_KNOBS",
    "PLACEMENTS",
    "PROXY_GROUP",
    "SHARE_CLASS_NAMES",
    "SHARE_CLASSES",
    "context_budget_from_meta",
    "context_policy",
    "knob_validate",
    "share_meta_key",
    "window_plan",
]

# The Metadata page's groups of the knobs an author sets (universes.meta_keys shows them under these).
BUDGET_GROUP = "Memory context budget"
LAYOUT_GROUP = "Memory context: point of view"
PROXY_GROUP = "Memory proxy"

# The budget classes, each with what it holds (the Metadata page's help for its share key).
SHARE_CLASS_NAMES = {
    "summary": "chapter and arc summaries (the story so far)",
    "chapter": "the recent turns",
    "lore_activated": "activated lore entries",
    "mental_model": "mental models",
    "belief": "beliefs",
    "fact": "facts",
    "narrative": "narrative chunks",
    "lore": "lore found by meaning",
}
SHARE_CLASSES = tuple(SHARE_CLASS_NAMES)
SHARE_META_PREFIX = "context_share_"
# Where the memory proxy puts the memory in a front end's messages (docs/proxy.md, "Placement").
PLACEMENTS = {
    "split": "the layers that stay the same from turn to turn after the front end's system prompts, what this "
    "action recalls as a note after the chat's last message (depth 0)",
    "note": "the whole memory as a note after the chat's last message (depth 0)",
    "system": "the whole memory after the front end's system prompts, before the chat",
}


def share_meta_key(share_class: str) -> str:
    return SHARE_META_PREFIX + share_class


@dataclass(frozen=True)
class Knob:
    """One knob: the `ContextPolicy` field it fills, its default, and (for authors) its meta key and bounds."""

    field: str
    default: Any
    why: str  # the measurement or reason that chose the default (docs/benchmarks.md has the figures)
    meta_key: str = ""  # "" : set in code only
    kind: str = "int"  # int | bool | choice
    low: int | None = None
    high: int | None = None
    choices: tuple[str, ...] = ()
    help: str = ""  # the Metadata page's help (meta keys only)
    group: str = BUDGET_GROUP
    unset: str = ""  # what an unset key means, when not the default itself (the Metadata page's "default")

    def parse(self, raw) -> Any:
        """Return the value `raw` (a meta value) stands for; raise ValueError saying what is wrong."""
        text = str(raw).strip()
        if self.kind == "bool":
            if text.lower() not in ("true", "false"):
                raise ValueError(f"{self.meta_key} is true or false, not “{text}”.")
            return text.lower() == "true"
        if self.kind == "choice":
            if text not in self.choices:
                raise ValueError(f"{self.meta_key} is one of {', '.join(self.choices)}, not “{text}”.")
            return text
        try:
            number = int(text)
        except ValueError:
            raise ValueError(f"{self.meta_key} is a whole number ({self.help_short()}), not “{text}”.") from None
        if (self.low is not None and number < self.low) or (self.high is not None and number > self.high):
            raise ValueError(f"{self.meta_key} must be between {self.low} and {self.high} ({self.help_short()}).")
        return number

    def help_short(self) -> str:
        return self.help.split(":")[0].split(" (")[0].rstrip(".").lower() if self.help else self.field

    def stored(self, raw) -> str:
        """Return the text to store for `raw` (validated and normalised: "10" for " 10 ", "true" for "True")."""
        value = self.parse(raw)
        return str(value).lower() if isinstance(value, bool) else str(value)

    def default_text(self) -> str:
        if self.unset:
            return self.unset
        return str(self.default).lower() if isinstance(self.default, bool) else str(self.default)


# The narrator's memory context budget when the universe sets none: the Context viewer's 1,200
# plus the ~800 tokens the four recent turns took outside the budget before they joined it.
DEFAULT_CONTEXT_BUDGET = DEFAULT_TOKEN_BUDGET + 800
CONTEXT_BUDGET_MIN = 200
CONTEXT_BUDGET_MAX = LIMITS.token_budget_max
# Caps, not reservations (they may add up to more than 100). See docs/long-play.md, "The budget".
DEFAULT_SHARES = {
    "summary": 10,
    "chapter": 85,
    "lore_activated": 50,
    "mental_model": 100,
    "belief": 100,
    "fact": 100,
    "narrative": 100,
    "lore": 100,
}
# Within activated lore, what the budget is offered first (protected entries come before all).
DEFAULT_ACTIVATION_RANK = MappingProxyType(
    {"constant": 1, "forced": 1, "sticky": 2, "key": 2, "after_first_match": 2, "recursion": 3}
)

KNOBS: tuple[Knob, ...] = (
    Knob(
        "token_budget",
        DEFAULT_CONTEXT_BUDGET,
        meta_key="context_budget",
        low=CONTEXT_BUDGET_MIN,
        high=CONTEXT_BUDGET_MAX,
        why="2,000 suits a small local model; 3,000 and 6,000 buy 0.04 and 0.08 more LoCoMo evidence for 1.5x and "
        '3x the reading (docs/benchmarks.md, "What a larger budget buys")',
        help="Tokens of memory the narrator reads each turn: the story so far (summaries, the recent turns), what the "
        f"action recalls, the lore and the point of view, which the shares below divide ({CONTEXT_BUDGET_MIN:,}-"
        f"{CONTEXT_BUDGET_MAX:,}). More for a model with a large context (8k, 32k, hosted), less for a small local "
        "one: the model's context must hold this plus the instructions, the action and the answer "
        "(sampler_max_tokens). The memory proxy uses it too unless the front end asks for another.",
    ),
    *(
        Knob(
            f"shares.{share_class}",
            DEFAULT_SHARES[share_class],
            meta_key=share_meta_key(share_class),
            low=0,
            high=100,
            why="caps per class: one pool let narrative chunks take 1,015 of 1,200 tokens, activation first let the "
            "demo's recursion take every token; the recent turns' share is the cache-first layout's",
            help=f"Percent of the memory context's budget {what} may use (0-100).",
        )
        for share_class, what in SHARE_CLASS_NAMES.items()
    ),
    Knob(
        "reserve_recall",
        10,
        meta_key="context_reserve_recall",
        low=0,
        high=100,
        why="kept for what the action recalls so the recent turns and activated lore never crowd out the entry the "
        "player asked about (the demo's \"The Copper Hood\"); never above the cap, and what the recent turns' "
        "window may not plan on",
        help="Percent of the memory context's budget kept for what the action recalls (narrative memory, lore found "
        "by meaning, facts, beliefs, models): the recent turns and activated lore may not spend it; what recall "
        "does not need goes back to them (0-100; never above context_cap_recall).",
    ),
    Knob(
        "cap_recall",
        12,
        meta_key="context_cap_recall",
        low=0,
        high=100,
        why="cache-first: what changes with each action is read anew by a prefix cache; at 12% (and the recent turns' "
        "85% share) the demo's median shared prefix is above 70%, and what short turns leave of their share "
        "keeps LoCoMo's evidence at the engine's hybrid search (docs/benchmarks.md, \"One context, one prompt\")",
        help="Percent of the memory context's budget that what changes with each action (what it recalled, lore its "
        "turn activated) may use, even when the rest leaves budget unused (0-100; 100: no cap), plus what the "
        "recent turns leave of their share when they are short (context_recent_turns). Low, most of the prompt "
        "stays the same from turn to turn, so a model server's prefix cache reuses it and the first word comes "
        "sooner; higher, the action recalls more (docs/long-play.md).",
    ),
    Knob(
        "recent_turns",
        10,
        meta_key="context_recent_turns",
        low=1,
        high=200,
        why="the recent turns show at most this many turns: on LoCoMo (one ~25-token utterance a turn) the share "
        "they cannot fill goes to recall (evidence at or above the engine's hybrid search), on the demo "
        '(~170-token turns) the share binds first (docs/benchmarks.md, "One context, one prompt")',
        help="Most turns the recent turns show in full, within their share (context_share_chapter); older turns come "
        "back through recall. When the story already holds more turns and these are short (a chat of one-line "
        "messages), what they leave of their share goes to recall, on top of context_cap_recall.",
    ),
    Knob(
        "player_on_scene",
        True,
        meta_key="pov_player_on_scene",
        kind="bool",
        group=LAYOUT_GROUP,
        why="the player character witnesses every turn they act in, whether or not the game lists them present",
        help="true or false: the player character is present in every turn they act in (a turn with a player "
        "input) and on scene when they act next, without the game listing them (who knows what).",
    ),
    Knob(
        "proxy_placement",
        "split",
        meta_key="proxy_memory_placement",
        kind="choice",
        choices=tuple(PLACEMENTS),
        group=PROXY_GROUP,
        why="a prefix cache survives only before the first change: the chat's own messages first, what each request "
        "changes last (bench/proxy_prefix.py)",
        help="Where the memory proxy puts the memory in a front end's messages when they hold no {{axiom_memory}} "
        "marker: " + "; ".join(f"{name}: {what}" for name, what in PLACEMENTS.items()) + ".",
    ),
    Knob(
        "proxy_repeat_chat",
        False,
        meta_key="proxy_repeat_chat",
        kind="bool",
        group=PROXY_GROUP,
        why="the front end's messages already carry its recent turns: repeating them took ~70% of the memory",
        help="true or false: the memory proxy's memory repeats the recent turns the front end's own messages already "
        "carry (false: it leaves them out and spends their share on recall).",
    ),
    Knob(
        "k_narrative", DEFAULT_K_NARRATIVE, why="the chunks kept whole before focus excerpts (bench/excerpt_latency.py)"
    ),
    Knob("k_lore", DEFAULT_K_LORE, why="lore hits asked of the search, before one hop of links"),
    Knob("window_step", 4, why="the window moves this many turns at a time: its start stays put between moves"),
    Knob("min_recent", 4, why='the old "last four turns": a chapter just opened still reads as a story'),
    Knob("max_lookback", 60, why="turns read for the window (a share holds far fewer)"),
    Knob("tokens_per_small_chunk", 20, why="the search asks for budget / 20 chunks: the budget, not k, decides"),
    Knob(
        "max_fill_k",
        400,
        why="80 stopped a 6,000-token context at ~4,000 tokens; 400 fills it (0.97 of LoCoMo's "
        "evidence) and bounds the search's cost beyond",
    ),
    Knob("max_item_percent", 40, why="no one entry takes more: the 796-token card took two thirds of 1,200"),
    Knob(
        "excerpt_max_kept_fraction",
        2 / 3,
        kind="float",
        why="an excerpt must save a third of its chunk, or the whole chunk is worth its price",
    ),
    Knob(
        "excerpt_following",
        1,
        why="the sentence after each best one: 2 of 44 evidence excerpts lost the answer, 8 of "
        "37 without it (bench/excerpt_latency.py)",
    ),
    Knob("max_beliefs_per_subject", 6, why="a character's strongest beliefs, not their whole history"),
    Knob("max_facts", 12, why="a character's most recent facts (and as many of a named time)"),
    Knob("max_recalled", 6, why="known facts that bear on the action added per character on scene"),
    Knob(
        "activation_rank",
        DEFAULT_ACTIVATION_RANK,
        kind="mapping",
        why="constant and forced lore first, then keys and sticky, recursion last",
    ),
)
META_KNOBS: dict[str, Knob] = {knob.meta_key: knob for knob in KNOBS if knob.meta_key}


_DEFAULT = {knob.field: knob.default for knob in KNOBS}


@dataclass(frozen=True)
class ContextPolicy:
    """Every knob of one memory context (`KNOBS` has each one's default, meaning and why)."""

    token_budget: int = _DEFAULT["token_budget"]
    shares: Mapping[str, int] = field(default_factory=lambda: MappingProxyType(dict(DEFAULT_SHARES)))
    reserve_recall: int = _DEFAULT["reserve_recall"]
    cap_recall: int | None = _DEFAULT["cap_recall"]
    recent_turns: int = _DEFAULT["recent_turns"]
    player_on_scene: bool = _DEFAULT["player_on_scene"]
    proxy_placement: str = _DEFAULT["proxy_placement"]
    proxy_repeat_chat: bool = _DEFAULT["proxy_repeat_chat"]
    k_narrative: int = _DEFAULT["k_narrative"]
    k_lore: int = _DEFAULT["k_lore"]
    window_step: int = _DEFAULT["window_step"]
    min_recent: int = _DEFAULT["min_recent"]
    max_lookback: int = _DEFAULT["max_lookback"]
    tokens_per_small_chunk: int = _DEFAULT["tokens_per_small_chunk"]
    max_fill_k: int = _DEFAULT["max_fill_k"]
    max_item_percent: int = _DEFAULT["max_item_percent"]
    excerpt_max_kept_fraction: float = _DEFAULT["excerpt_max_kept_fraction"]
    excerpt_following: int = _DEFAULT["excerpt_following"]
    max_beliefs_per_subject: int = _DEFAULT["max_beliefs_per_subject"]
    max_facts: int = _DEFAULT["max_facts"]
    max_recalled: int = _DEFAULT["max_recalled"]
    activation_rank: Mapping[str, int] = field(default_factory=lambda: DEFAULT_ACTIVATION_RANK)
    # The request's: whose point of view (None: those on scene; (): none) and which turns the caller's
    # own messages already carry (the memory proxy: the chat's turns), left out of the recent turns.
    pov: tuple[str, ...] | None = None
    carried_turns: frozenset[int] = frozenset()

    def share(self, budget_class: str) -> int:
        """Return the percent of the budget `budget_class` may use (100 for a class without a share)."""
        return self.shares.get(budget_class, 100)

    def share_tokens(self, budget_class: str) -> int:
        return self.token_budget * self.share(budget_class) // 100

    @property
    def cap_tokens(self) -> int | None:
        """What changes with each action may use, in tokens (None: no cap)."""
        return None if self.cap_recall is None else self.token_budget * self.cap_recall // 100

    @property
    def reach_back(self) -> bool:
        """Whether the recent turns' window reaches back past the open chapter (the cache-first layout)."""
        return self.cap_recall is not None

    @property
    def reserve_tokens(self) -> int:
        return self.token_budget * self.reserve_recall // 100

    @property
    def window_share(self) -> int:
        """The recent turns' share as their window plans it: never on the budget kept for recall nor on the
        summaries' share (the narrator and impersonation read the same window)."""
        return min(self.share("chapter"), max(100 - self.reserve_recall - self.share("summary"), 0))

    def window_kwargs(self) -> dict[str, Any]:
        """The recent turns' window as this policy plans it, as `chapters.story.story_items` keywords (the
        narrator and impersonation read the same window)."""
        return {
            "shares": {**self.shares, "chapter": self.window_share},
            "reach_back": self.reach_back,
            "window_step": self.window_step,
            "min_recent": self.min_recent,
            "max_lookback": self.max_lookback,
            "max_turns": self.recent_turns,
        }

    def as_dict(self) -> dict[str, Any]:
        """Return the policy as JSON-ready values (the API's and the viewer's explain)."""
        out = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, Mapping):
                value = dict(value)
            elif isinstance(value, frozenset):
                value = sorted(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[item.name] = value
        return out


DEFAULT_POLICY = ContextPolicy()


def meta_values(universe_meta: Mapping[str, str] | None) -> dict[str, Any]:
    """Return {policy field: value} for every knob the universe sets validly (an invalid value is ignored)."""
    values: dict[str, Any] = {}
    for key, knob in META_KNOBS.items():
        raw = (universe_meta or {}).get(key)
        if raw is None or not str(raw).strip():
            continue
        try:
            values[knob.field] = knob.parse(raw)
        except ValueError:
            continue
    return values


def context_policy(universe_meta: Mapping[str, str] | None = None, **request) -> ContextPolicy:
    """Return the policy for a context: the universe's valid meta over the defaults, then the request's values.

    `request`: policy fields the request sets (`token_budget`, `k_narrative`, `k_lore`, `pov`,
    `carried_turns`); None values are left to the universe and the defaults.
    """
    values = meta_values(universe_meta)
    shares = dict(DEFAULT_SHARES)
    for name in [n for n in values if n.startswith("shares.")]:
        shares[name.split(".", 1)[1]] = values.pop(name)
    values.update({name: value for name, value in request.items() if value is not None})
    policy = replace(DEFAULT_POLICY, shares=MappingProxyType(shares), **values)
    if policy.cap_recall is not None and policy.reserve_recall > policy.cap_recall:
        policy = replace(policy, reserve_recall=policy.cap_recall)
    return policy


def context_budget_from_meta(universe_meta: Mapping[str, str] | None, default: int = DEFAULT_CONTEXT_BUDGET) -> int:
    """Return the narrator's memory budget in tokens: the universe's valid `context_budget`, else `default`."""
    return meta_values(universe_meta).get("token_budget", default)


def window_plan(universe_meta: Mapping[str, str] | None) -> dict[str, Any]:
    """Return the recent turns' window as the universe plans it (`ContextPolicy.window_kwargs`)."""
    return context_policy(universe_meta).window_kwargs()


def knob_validate(key: str, value: str) -> str | None:
    """Return the text to store for a knob's meta `key`, None when `key` is no knob's; raise ValueError."""
    knob = META_KNOBS.get(key)
    if knob is None:
        return None
    return knob.stored(value)
