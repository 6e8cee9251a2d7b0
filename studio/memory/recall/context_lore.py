"""The Lore Book's part of the memory context: activated entries, the budget rules, the explain.

`build_memory_context` (studio/memory/recall/context.py, under `next_turn_context`) calls these; the
rules live here only.

Activation: the save's book is evaluated for the next turn with the pending input
(`lore_activation_for_turn`, the same evaluation `turn_append` records), so the viewer, the
API and the narrator see what play will activate. Activated entries (constant, key, recursion,
sticky, decorators) come before lore found by meaning, in prompt order (insertion order, or
priority where set). An activated entry is *protected* when the pending input matched it or
it names a character in focus (one of its keys or its title is a focus term or subject).

Budget (`assemble`): the caller's token budget (the narrator's is the universe's `context_budget`,
`context_budget_from_meta`, else 2,000), in four passes over the candidates in the order they are offered:
1. ignore-budget entries always go in, outside the budget (`used_tokens` may then exceed it;
   they take nothing from what the other items share);
2. protected entries go in while the whole budget allows: before any other layer, so
   narrative chunks and semantic lore never push them out;
3. every other item, while it fits both what is left and its layer's share
   (`context_share_<class>` in Universe_Meta, a percentage of the budget). Part of the
   budget is *kept for what the action recalls* (`context_reserve_recall`, `is_recall`: the
   mental models, beliefs, facts, narrative chunks and lore found by meaning for this
   action): the story so far and activated lore, offered before them, may not spend it, so
   recent turns and lore their text activates never crowd out the entry the player asked
   about (measured on the demo: 742 tokens of recent turns and 987 of activated lore left
   "The Copper Hood", found by meaning at rank 1 for "ask Hesper Vale about the Copper
   Hood", out of a 2,000-token context);
4. items left out only by their share or by that reservation, if they fit what is left after
   pass 3 (never those of a share set to 0, nor the story so far's summaries and turns,
   `no_refill`: what memory recalls for the action gets what the shares left, and what it
   did not need goes back to the rest).
A cap on what changes with each action (`context_cap_recall`, unset by default; `changes_per_action`:
everything the prompt lays out after the recent turns, i.e. what the action recalled and the
lore the turn activated, but not constant lore, the story so far or mental models) holds those
items to a percentage of the budget in passes 3 and 4, even when the rest leaves budget
unused: the prompt is then shorter, and the part before it (instructions, constant lore,
summaries, the recent turns) is a larger share of it, which a model server's prefix cache
reuses from the previous turn (docs/long-play.md, "A prompt the model server can cache").
Entries the player named (protected) still go in, and count against it.
An item that does not fit is left out whole ("over budget: ..."); no text is cut here (a
narrative chunk may come as a focus excerpt, `studio.memory.recall.excerpt`, decided before a
second assembly: every call decides every candidate afresh). Items of a dated group
(`why["group"]`, e.g. narrative chunks of one story day) share one heading per layer, whose
tokens (`why["group_tokens"]`) the group's first item taken in that layer pays.

Text: lore items carry the whole entry (never a stored chunk of it), narrative chunks end at
a sentence end, and `{{user}}` / `{{char}}` are filled (`studio.memory.recall.macros.macro_names`: the
player character; the card's character, else the first character in focus who is not the
player) in the item text only; stored text is unchanged.

Explain: one record per entry of the book (`lore_explain`): the engine's decision and
reasons, then what the context did with it (semantic rank, budget decision).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from studio.memory.recall.macros import fill_macros
from studio.memory.recall.query_params import DEFAULT_TOKEN_BUDGET, LIMITS

# The budget classes, each with what it holds (the Metadata page's help for its share key).
SHARE_CLASS_NAMES = {
    "summary": "chapter and arc summaries (the story so far)", "chapter": "the open chapter's turns",
    "lore_activated": "activated lore entries", "mental_model": "mental models", "belief": "beliefs",
    "fact": "facts", "narrative": "narrative chunks", "lore": "lore found by meaning",
}
SHARE_CLASSES = tuple(SHARE_CLASS_NAMES)
SHARE_META_PREFIX = "context_share_"
# Caps, not reservations (they may add up to more than 100). With one shared pool the demo
# showed both failures: narrative chunks took 1,015 of 1,200 tokens and left the named entry
# out, and with activation first the recursion through the demo's book (22 of 34 entries for
# "ask Hesper Vale about the Copper Hood") took every token. Half for activated lore, 40% for
# narrative leaves the lore found by meaning its place; protected entries are not capped.
# The story so far (long play): summaries up to 15%, the recent turns up to 70% (they
# replaced the four recent turns that sat outside the budget; the narrator's budget grew).
# The recent turns come before what the action recalls, so the larger their part, the more of
# the prompt a model server's prefix cache reuses (bench/prompt_prefix.py).
DEFAULT_SHARES = {"summary": 15, "chapter": 70, "lore_activated": 50, "mental_model": 100, "belief": 100, "fact": 100, "narrative": 40, "lore": 100}
# Percent of the budget kept for what the action recalls until it has been offered (a floor,
# not a cap: unused, it goes back to the rest in pass 4).
RECALL_RESERVE_META = "context_reserve_recall"
DEFAULT_RECALL_RESERVE = 40
RECALL_CAP_META = "context_cap_recall"  # unset (the default): no cap
# The narrator's memory context budget in tokens (the story so far, what the action recalls and
# the lore, which the shares above divide): `context_budget`, for a model whose context holds more
# (8k, 32k, a hosted one) or less. Unset: the Context viewer's default plus the ~800 tokens the
# four recent turns took outside the budget before the chapter's turns joined it (docs/long-play.md).
# At least 200: below it the recent turns' share holds about one short turn and recall nothing,
# and a value typed with a zero too few (20 for 2000) is refused rather than played.
CONTEXT_BUDGET_META = "context_budget"
DEFAULT_CONTEXT_BUDGET = DEFAULT_TOKEN_BUDGET + 800
CONTEXT_BUDGET_MIN = 200
CONTEXT_BUDGET_MAX = LIMITS.token_budget_max
RECALL_LAYERS = ("mental_model", "belief", "fact", "narrative", "lore")
# Within activated lore, what the budget is offered first (protected entries come before all).
ACTIVATION_RANK = {"constant": 1, "forced": 1, "sticky": 2, "key": 2, "after_first_match": 2, "recursion": 3}
# Engine decisions after which lore found by meaning may still bring an entry in: the entry
# was simply not named. A rule that refused it (disabled, cooldown, a failed roll, a lost
# group, @@dont_activate, ...) refuses it for the semantic layer too.
SEMANTIC_ALLOWED_CODES = {"no_match", "no_keys", "beyond_scan_depth", "secondary", "additional_keys", "budget"}
_SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]]*(?=\s|$)")


def share_meta_key(share_class: str) -> str:
    return SHARE_META_PREFIX + share_class


def shares_from_meta(meta: dict[str, str]) -> dict[str, int]:
    """Return the per-class budget shares (percent), the universe's where set (validated on save)."""
    shares = dict(DEFAULT_SHARES)
    for share_class in SHARE_CLASSES:
        raw = meta.get(share_meta_key(share_class))
        try:
            value = int(str(raw).strip())
        except (TypeError, ValueError):
            continue
        if 0 <= value <= 100:
            shares[share_class] = value
    return shares


def _percent(meta: dict[str, str], key: str) -> int | None:
    try:
        value = int(str(meta.get(key, "")).strip())
    except ValueError:
        return None
    return value if 0 <= value <= 100 else None


def context_budget_from_meta(meta: dict[str, str], default: int = DEFAULT_CONTEXT_BUDGET) -> int:
    """Return the narrator's memory context budget in tokens: the universe's `context_budget` (validated on
    save), else `default`; a value out of its bounds is ignored, as an invalid share is."""
    try:
        value = int(str(meta.get(CONTEXT_BUDGET_META, "")).strip())
    except ValueError:
        return default
    return value if CONTEXT_BUDGET_MIN <= value <= CONTEXT_BUDGET_MAX else default


def recall_cap_from_meta(meta: dict[str, str]) -> int | None:
    """Return the percent of the budget that what changes with each action may use (`context_cap_recall`), or None."""
    return _percent(meta, RECALL_CAP_META)


def reserve_from_meta(meta: dict[str, str]) -> int:
    """Return the percent of the budget kept for what the action recalls (`context_reserve_recall`), never above
    the cap on what changes with each action (a floor above the cap could not be kept)."""
    reserve = _percent(meta, RECALL_RESERVE_META)
    reserve = DEFAULT_RECALL_RESERVE if reserve is None else reserve
    cap = recall_cap_from_meta(meta)
    return reserve if cap is None else min(reserve, cap)


def window_shares(shares: dict[str, int], reserve: int) -> dict[str, int]:
    """Return `shares` with the recent turns' share as their window plans it: never on the budget
    kept for recall nor on the summaries' share (the narrator and impersonation read the same window)."""
    return {**shares, "chapter": min(shares.get("chapter", 100), max(100 - reserve - shares.get("summary", 0), 0))}


def window_plan(meta: dict[str, str]) -> dict[str, Any]:
    """The recent turns' window as Universe_Meta plans it, as `story_items` keywords (the narrator and
    impersonation read the same window): the shares it plans on (`window_shares`), and whether it reaches
    back past the open chapter (with a cap on what changes with each action, the budget recall may not use
    goes to a longer window)."""
    return {"shares": window_shares(shares_from_meta(meta), reserve_from_meta(meta)),
            "reach_back": recall_cap_from_meta(meta) is not None}


def changes_per_action(item) -> bool:
    """Does the prompt lay `item` out after the recent turns (what this action recalled or its turn activated)?

    The same split as `studio.saves.narrator.prompt.memory_sections`: constant lore, the story so far and
    mental models come before the recent turns; beliefs, facts, narrative memory and other lore after them."""
    return item.layer in ("belief", "fact", "narrative") or (item.layer == "lore" and item.why.get("activation") != "constant")


def is_recall(item) -> bool:
    """Is `item` something the action itself recalled (not the story so far, not activated lore)?"""
    return item.layer in RECALL_LAYERS and not item.why.get("activation") and not item.why.get("protected")


def whole_sentences(text: str) -> str:
    """Return `text` without a trailing unfinished sentence (unchanged when it has no sentence end)."""
    stripped = (text or "").rstrip()
    ends = list(_SENTENCE_END.finditer(stripped))
    if not ends or ends[-1].end() == len(stripped):
        return stripped
    return stripped[: ends[-1].end()]


def _names(values) -> set[str]:
    return {str(v).strip().lower() for v in values if v and str(v).strip()}


@dataclass
class LoreActivationView:
    """What the context knows of the book's activation for the next turn."""

    result: Any  # ActivationResult
    specs: dict[str, Any]  # entry id -> LoreSpec
    macros: dict[str, str]


def evaluate_lore(game_save, query_text: str, *, macros: dict[str, str] | None = None) -> LoreActivationView | None:
    """Evaluate the save's book for its next turn with `query_text` as the pending input (None: no book).

    `macros`: the keys' macro values (`lore_macros_for`), when the caller has them already.
    """
    from studio.memory.lore.activation_state import lore_activation_for_turn, lore_macros_for

    if not game_save.universe.lore_entries.exists():
        return None
    if macros is None:
        macros = lore_macros_for(game_save)
    result, _extra = lore_activation_for_turn(save=game_save, pending_input=query_text or "", macros=macros)
    specs = {spec.entry_id: spec for spec in result.explanations.specs}
    return LoreActivationView(result=result, specs=specs, macros=macros)


def fill(text: str, macros: dict[str, str]) -> str:
    return fill_macros(text, user=macros.get("user"), char=macros.get("char"))


def activated_items(view: LoreActivationView, *, focus: list[str], macros: dict[str, str], make_item):
    """Return the context items of the activated entries, in prompt order, protected ones marked.

    `make_item(layer=, text=, reason=, why=, ref=)` makes one (`ContextItem.of`: it counts the tokens).
    """
    focus_names = _names(focus)
    items = []
    for spec in view.result.activated:
        record = view.result.explanations[spec.entry_id]
        pending = "pending input" in (record.matched_in or "")
        names = _names([spec.title, *spec.keys])
        in_focus = sorted(focus_names & names)
        protected = pending or bool(in_focus)
        text = fill(f"{spec.title}: {spec.text}" if spec.title else spec.text, macros)
        why = "; ".join(record.reasons) or record.code
        if in_focus and not pending:
            why += f"; names “{in_focus[0]}”, in focus"
        items.append(make_item(
            layer="lore", text=text,
            reason=f"lore activated: {why}",
            why={"activation": record.code, "activation_rank": 0 if protected else ACTIVATION_RANK.get(record.code, 2),
                 "matched_key": record.matched_key, "matched_in": record.matched_in,
                 "via_entry": record.via_entry, "protected": protected, "ignore_budget": spec.ignore_budget,
                 "budget_class": "lore_activated", "in_focus": in_focus[:1],
                 # Where a narrator prompt places it (SillyTavern's position / depth / role).
                 "position": spec.position, "depth": spec.depth, "role": spec.role,
                 "insertion_order": spec.insertion_order},
            ref={"entry_id": spec.entry_id},
        ))
    return items


def semantic_allowed(view: LoreActivationView | None, entry_id: str | None) -> tuple[bool, str]:
    """May lore found by meaning bring this entry in? (False, why) when the book's rules refuse it."""
    if view is None or not entry_id or entry_id not in view.specs:
        return True, ""
    spec = view.specs[entry_id]
    record = view.result.explanations[entry_id]
    if record.included:
        return False, "already in as an activated entry"
    if not spec.vectorized:
        return False, "not vectorized: found by keys only"
    if record.code not in SEMANTIC_ALLOWED_CODES:
        return False, "refused by its activation rules (" + "; ".join(record.reasons or [record.code]) + ")"
    return True, ""


def whole_entry_text(view: LoreActivationView | None, entry_id: str | None, fallback: str, macros) -> str:
    """Return the whole entry (title: text) for a lore hit, not the stored chunk of it."""
    spec = view.specs.get(entry_id) if view and entry_id else None
    if spec is None:
        return fill(fallback, macros)
    return fill(f"{spec.title}: {spec.text}" if spec.title else spec.text, macros)


def budget_class(item) -> str:
    return item.why.get("budget_class") or item.layer


def assemble(candidates: list, *, token_budget: int, shares: dict[str, int], reserve: int = 0,
             cap: int | None = None) -> None:
    """Decide `included` / `cut` for every candidate (see the module docstring); nothing is truncated.

    `reserve`: the percent of the budget kept for what the action recalls (`is_recall`) until
    every candidate has been offered once. `cap`: the percent of the budget that what changes
    with each action (`changes_per_action`) may use in all (None: no cap).
    """
    for item in candidates:  # a second assembly (after excerpts) decides afresh
        item.included, item.cut = True, ""
        item.why.pop("budget", None)
    remaining = token_budget
    used: dict[str, int] = {}
    changing, changing_cap = 0, None if cap is None else token_budget * cap // 100  # what changes with each action
    decided: set[int] = set()
    kept = token_budget * reserve // 100  # what recall may still draw on before the others may
    groups: set[tuple[str, str]] = set()  # (layer, dated group) whose heading is paid for: each layer prints its own

    def cost(item) -> int:
        group = item.why.get("group")
        return item.tokens + (item.why.get("group_tokens", 0) if group and (item.layer, group) not in groups else 0)

    def take(index: int, item, note: str = "", *, outside: bool = False) -> None:
        nonlocal remaining, kept, changing
        if not outside:
            spent = cost(item)
            remaining -= spent
            used[budget_class(item)] = used.get(budget_class(item), 0) + spent
            if is_recall(item):
                kept = max(kept - spent, 0)
            if changes_per_action(item):
                changing += spent
        if item.why.get("group"):
            groups.add((item.layer, item.why["group"]))
        item.included, item.cut = True, ""
        if note:
            item.why["budget"] = note
        decided.add(index)

    def over(item, left: int) -> str:
        return f"over budget: needs {cost(item)} tokens, {max(left, 0)} left (left out whole)"

    def over_cap(item, *, keep: int = 0) -> str:
        """The cut when `item` would take what changes with each action past the cap, else ''. `keep`: the part
        of the cap still kept for what the action recalls, which lore its turn activated may not spend."""
        if changing_cap is None or not changes_per_action(item):
            return ""
        limit = changing_cap - (0 if is_recall(item) else keep)
        if changing + cost(item) <= limit:
            return ""
        kept_note = f" beside the {keep} kept for what the action recalls" if keep and not is_recall(item) else ""
        return (f"over budget: needs {cost(item)} tokens; what changes with each action is capped at {cap}% of the "
                f"budget = {changing_cap} tokens (context_cap_recall), {max(limit - changing, 0)} left{kept_note} "
                "(left out whole)")

    for index, item in enumerate(candidates):  # 1: ignore budget
        if item.why.get("ignore_budget"):
            take(index, item, "ignores the budget: always included", outside=True)
    for index, item in enumerate(candidates):  # 2: protected
        if index in decided or not item.why.get("protected"):
            continue
        if cost(item) <= remaining:
            take(index, item, "protected (named in the input or in focus): taken before the other layers")
        else:
            item.included, item.cut = False, over(item, remaining)
            decided.add(index)
    refill: dict[int, str] = {}  # index -> what held it back
    for index, item in enumerate(candidates):  # 3: shares, and the budget kept for recall
        if index in decided:
            continue
        cls = budget_class(item)
        share_cap = token_budget * shares.get(cls, 100) // 100
        available = remaining if is_recall(item) else remaining - kept
        if cost(item) > remaining:
            item.included, item.cut = False, over(item, remaining)
        elif capped := over_cap(item, keep=kept):
            item.included, item.cut = False, capped
            refill[index] = "held back by the cap on what changes with each action"
            continue
        elif used.get(cls, 0) + cost(item) > share_cap:
            item.included = False
            item.cut = (f"over budget: needs {cost(item)} tokens; the {cls.replace('_', ' ')} share "
                        f"({shares.get(cls, 100)}% = {share_cap} tokens) has {max(share_cap - used.get(cls, 0), 0)} left "
                        "(left out whole)")
            refill[index] = "over its share"
            continue
        elif cost(item) > available:
            item.included = False
            item.cut = (f"over budget: needs {cost(item)} tokens, {max(available, 0)} left beside the {kept} "
                        f"kept for what the action recalls ({reserve}% of the budget; left out whole)")
            refill[index] = "held back by the budget kept for recall"
            continue
        else:
            take(index, item)
            continue
        decided.add(index)
    for index, held in refill.items():  # 4: what the shares and the reservation left unused (not for a share set to 0, nor the story so far)
        item = candidates[index]
        if item.why.get("no_refill") or shares.get(budget_class(item), 100) == 0:
            continue
        if capped := over_cap(item):
            item.cut = capped
        elif cost(item) <= remaining:
            take(index, item, f"{held}, taken from the budget the other layers left")


def lore_explain(view: LoreActivationView | None, items: list, refused: dict[str, str]) -> list[dict]:
    """Return one record per entry of the book: the engine's decision, then the context's."""
    if view is None:
        return []
    by_entry: dict[str, list] = {}
    for item in items:
        if item.layer == "lore" and item.ref.get("entry_id"):
            by_entry.setdefault(item.ref["entry_id"], []).append(item)
    out = []
    for entry_id, record in view.result.explanations.items():
        data = record.as_dict()
        data["activated"] = data.pop("included")
        mine = by_entry.get(entry_id, [])
        included = any(i.included for i in mine)
        decisions = []
        for item in mine:
            rank = item.why.get("final_rank")
            if rank is not None and not item.why.get("activation"):
                decisions.append(f"found by meaning at rank {rank}")
            if item.why.get("expanded_from"):
                decisions.append(f"linked from lore entry {item.why['expanded_from']}")
            if item.included:
                decisions.append(item.why.get("budget") or "fits the budget")
            else:
                decisions.append(item.cut or "left out")
        if entry_id in refused:
            decisions.append(f"found by meaning, not taken: {refused[entry_id]}")
        data.update(included=included, context=decisions,
                    semantic_rank=next((i.why.get("final_rank") for i in mine if i.why.get("final_rank") is not None
                                        and not i.why.get("activation")), None))
        out.append(data)
    return out
