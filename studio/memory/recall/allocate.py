"""The one allocator: it spends the memory context's budget over every layer's candidates.

`allocate(candidates, policy=, query_text=, spent=)` decides, for every candidate a layer
provider offered (`studio.memory.recall.layers`), whether it is in or why it was cut, by its
typed `ItemPolicy` (`studio.memory.recall.layout`) and the `ContextPolicy`'s knobs:

0. an entry longer than its share, or `max_item_percent` of the budget, is represented by a
   passage or its leading sentences (`fit.fit_to_share`), never dropped for its length alone;
   a protected entry only when longer than the whole budget;
1. the candidates are offered the budget in the layout's `Tier` order (protected lore, the
   recent turns, the summaries newest first, activated lore by activation rank, then what the
   action recalled in rounds: the best item of every recall layer, then the second, ...);
2. `assemble` spends the budget in four passes (below);
3. when whole narrative chunks left a recalled one out, the chunks ranked below the best
   `k_narrative` are represented by their focus excerpts (`studio.memory.recall.excerpt`) and
   the budget decides again (`assemble` decides every candidate afresh).

`assemble`'s passes, over the candidates in the order they are offered:
1. entries that ignore the budget (`outside_budget`) always go in, outside it (`used_tokens` may
   then exceed the budget; they take nothing from what the other items share);
2. protected entries go in while the whole budget allows: before any other layer;
3. every other item, while it fits both what is left and its class's share (`shares`, a
   percentage of the budget each). Part of the budget is *kept for what the action recalls*
   (`reserve`, the items with `recall`): the story so far and activated lore may not spend
   it, so they never crowd out the entry the player asked about. A cap on what changes with
   each action (`cap`, the items whose section is `per_action`) holds those to a percentage
   of the budget even when budget is left: the prompt is shorter, and the part before them
   is a larger share of it, which a model server's prefix cache reuses;
4. items left out only by their share, the reservation or the cap's part kept for recall, if
   they fit what is left after pass 3 (never those with `refill` off, nor of a share set to 0).
An item that does not fit is left out whole with the reason ("over budget: ..."). Items of a
dated group (`why["group"]`, e.g. narrative chunks of one story day) share one heading per
layer, whose tokens (`why["group_tokens"]`) the group's first item taken in that layer pays.
`spent`: tokens already taken from the budget outside the items (the point of view's text).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from studio.memory.recall.excerpt import excerpt_items
from studio.memory.recall.fit import fit_to_share
from studio.memory.recall.layout import RECALL_LAYERS, Tier

__all__ = ["Allocation", "allocate", "assemble", "offer_order"]


@dataclass
class Allocation:
    """What the allocator did: the candidates in the order offered, and the excerpt step's count and time."""

    offered: list = field(default_factory=list)
    excerpted: int = 0
    excerpt_ms: float | None = None


def offer_order(candidates: list) -> list:
    """Return `candidates` in the order the budget is offered them (the layout's tiers, then rank or round)."""
    rounds: dict[int, int] = {}
    per_layer: dict[str, int] = {}
    for index, item in enumerate(candidates):
        if item.policy.tier == Tier.RECALL:
            rounds[index] = per_layer.get(item.layer, 0)
            per_layer[item.layer] = rounds[index] + 1

    def key(index: int) -> tuple[int, int, int, int]:
        policy = candidates[index].policy
        if index in rounds:  # the best item of every recall layer, then the second of each, ... (a registered one last)
            layer = candidates[index].layer
            order = RECALL_LAYERS.index(layer) if layer in RECALL_LAYERS else len(RECALL_LAYERS)
            return (policy.tier, rounds[index], order, index)
        return (policy.tier, policy.rank, 0, index)

    return [candidates[i] for i in sorted(range(len(candidates)), key=key)]


def item_cap(item, *, policy, cap_extra: int = 0) -> int:
    """Return how many tokens `item` may take whole: its share (and the cap when it changes with each action)
    and `max_item_percent` of the budget; a protected entry the whole budget."""
    if item.policy.protected:
        return policy.token_budget
    share_cap = policy.share_tokens(item.policy.budget_class)
    if policy.cap_tokens is not None and item.policy.per_action:
        share_cap = min(share_cap, policy.cap_tokens + cap_extra)
    return min(share_cap, policy.token_budget * policy.max_item_percent // 100)


def allocate(candidates: list, *, policy, query_text: str, spent: int = 0, cap_extra: int = 0) -> Allocation:
    """Decide every candidate (the module docstring's steps); items already cut by their layer stay cut.

    `cap_extra`: tokens added to the cap on what changes with each action (the recent turns' share their
    window leaves, `chapters.story.Story.spare`)."""
    for item in candidates:  # an entry longer than its share (or the cap) is represented, not dropped
        if item.included and item.policy.shortenable and not item.policy.outside_budget:
            fit_to_share(item, cap=item_cap(item, policy=policy, cap_extra=cap_extra))
    offered = offer_order([item for item in candidates if item.included or not item.cut])
    budget = {
        "token_budget": policy.token_budget,
        "shares": policy.shares,
        "reserve": policy.reserve_recall,
        "cap": policy.cap_recall,
        "spent": spent,
        "cap_extra": cap_extra,
    }
    assemble(offered, **budget)
    allocation = Allocation(offered=offered)
    # Whole chunks left a recalled memory out: the best k_narrative stay whole, those below are represented by
    # their sentences that the action asks about, and the budget decides again.
    recalled = [item for item in offered if item.layer == "narrative" and item.policy.recall]
    if any(not item.included for item in recalled):
        started = time.perf_counter()
        allocation.excerpted = excerpt_items(
            recalled,
            query_text=query_text,
            keep_whole=policy.k_narrative,
            max_kept_fraction=policy.excerpt_max_kept_fraction,
            following=policy.excerpt_following,
        )
        if allocation.excerpted:
            assemble(offered, **budget)
        allocation.excerpt_ms = round((time.perf_counter() - started) * 1000, 2)
    return allocation


def assemble(
    candidates: list,
    *,
    token_budget: int,
    shares,
    reserve: int = 0,
    cap: int | None = None,
    spent: int = 0,
    cap_extra: int = 0,
) -> None:
    """Decide `included` / `cut` for every candidate (the module docstring's passes); nothing is truncated.

    `reserve`: the percent of the budget kept for what the action recalls until every candidate
    has been offered once. `cap`: the percent of the budget that what changes with each action
    may use in all (None: no cap), plus `cap_extra` tokens. `spent`: tokens the budget has already
    paid outside the items.
    """
    for item in candidates:  # a second assembly (after excerpts) decides afresh
        item.included, item.cut = True, ""
        item.why.pop("budget", None)
    remaining = token_budget - spent
    used: dict[str, int] = {}
    changing, changing_cap = (
        0,
        None if cap is None else token_budget * cap // 100 + cap_extra,
    )  # what changes each action
    decided: set[int] = set()
    kept = token_budget * reserve // 100  # what recall may still draw on before the others may
    groups: set[tuple[str, str]] = set()  # (layer, dated group) whose heading is paid for: each layer prints its own

    def cost(item) -> int:
        group = item.why.get("group")
        return item.tokens + (item.why.get("group_tokens", 0) if group and (item.layer, group) not in groups else 0)

    def take(index: int, item, note: str = "", *, outside: bool = False) -> None:
        nonlocal remaining, kept, changing
        if not outside:
            paid = cost(item)
            remaining -= paid
            used[item.policy.budget_class] = used.get(item.policy.budget_class, 0) + paid
            if item.policy.recall:
                kept = max(kept - paid, 0)
            if item.policy.per_action:
                changing += paid
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
        if changing_cap is None or not item.policy.per_action:
            return ""
        limit = changing_cap - (0 if item.policy.recall else keep)
        if changing + cost(item) <= limit:
            return ""
        kept_note = f" beside the {keep} kept for what the action recalls" if keep and not item.policy.recall else ""
        extra = f" + the {cap_extra} the recent turns leave" if cap_extra else ""
        return (
            f"over budget: needs {cost(item)} tokens; what changes with each action is capped at {cap}% of the "
            f"budget{extra} = {changing_cap} tokens (context_cap_recall), {max(limit - changing, 0)} left"
            f"{kept_note} (left out whole)"
        )

    for index, item in enumerate(candidates):  # 1: ignore budget
        if item.policy.outside_budget:
            take(index, item, "ignores the budget: always included", outside=True)
    for index, item in enumerate(candidates):  # 2: protected
        if index in decided or not item.policy.protected:
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
        share_class = item.policy.budget_class
        share_cap = token_budget * shares.get(share_class, 100) // 100
        available = remaining if item.policy.recall else remaining - kept
        if cost(item) > remaining:
            item.included, item.cut = False, over(item, remaining)
        elif capped := over_cap(item, keep=kept):
            item.included, item.cut = False, capped
            refill[index] = "held back by the cap on what changes with each action"
            continue
        elif used.get(share_class, 0) + cost(item) > share_cap:
            item.included = False
            item.cut = (
                f"over budget: needs {cost(item)} tokens; the {share_class.replace('_', ' ')} share "
                f"({shares.get(share_class, 100)}% = {share_cap} tokens) has "
                f"{max(share_cap - used.get(share_class, 0), 0)} left (left out whole)"
            )
            refill[index] = "over its share"
            continue
        elif cost(item) > available:
            item.included = False
            item.cut = (
                f"over budget: needs {cost(item)} tokens, {max(available, 0)} left beside the {kept} "
                f"kept for what the action recalls ({reserve}% of the budget; left out whole)"
            )
            refill[index] = "held back by the budget kept for recall"
            continue
        else:
            take(index, item)
            continue
        decided.add(index)
    for index, held in refill.items():  # 4: what the shares and the reservation left unused
        item = candidates[index]
        if not item.policy.refill or shares.get(item.policy.budget_class, 100) == 0:
            continue
        if capped := over_cap(item):
            item.cut = capped
        elif cost(item) <= remaining:
            take(index, item, f"{held}, taken from the budget the other layers left")
