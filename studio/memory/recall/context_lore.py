"""The Lore Book's part of the memory context: activated entries, lore found by meaning, the explain.

The layer providers (`studio.memory.recall.layers`) call these; the rules live here only.

Activation: the save's book is evaluated for the next turn with the pending input
(`lore_activation_for_turn`, the same evaluation `turn_append` records), so the viewer, the
API and the narrator see what play will activate. Activated entries (constant, key, recursion,
sticky, decorators) are offered the budget before lore found by meaning, in activation rank
(`ContextPolicy.activation_rank`). An activated entry is *protected* when the pending input
matched it or it names a character in focus (one of its keys or its title is a focus term or
subject): its `ItemPolicy` says so, and the allocator (`studio.memory.recall.allocate`) offers
it the budget before every other layer. A constant entry is printed with the lore that is
always active (the layout's first section); every other activated entry with what this action
recalled. An entry that ignores the budget (`ignore_budget`) is always in, outside it.

Lore found by meaning may not bring in an entry the book's own rules refused
(`semantic_allowed`), nor one already in as an activated entry.

Text: lore items carry the whole entry (never a stored chunk of it), and `{{user}}` /
`{{char}}` are filled (`studio.memory.recall.macros.macro_names`: the player character; the
card's character, else the first character in focus who is not the player) in the item text
only; stored text is unchanged.

Explain: one record per entry of the book (`lore_explain`): the engine's decision and
reasons, then what the context did with it (semantic rank, budget decision).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from studio.memory.recall.layout import ItemPolicy, Tier
from studio.memory.recall.macros import fill_macros
from studio.memory.recall.policy import DEFAULT_POLICY, context_budget_from_meta, window_plan

__all__ = [
    "LoreActivationView",
    "activated_items",
    "activated_policy",
    "context_budget_from_meta",
    "evaluate_lore",
    "fill",
    "lore_explain",
    "semantic_allowed",
    "whole_entry_text",
    "window_plan",
]

# Engine decisions after which lore found by meaning may still bring an entry in: the entry
# was simply not named. A rule that refused it (disabled, cooldown, a failed roll, a lost
# group, @@dont_activate, ...) refuses it for the semantic layer too.
SEMANTIC_ALLOWED_CODES = {"no_match", "no_keys", "beyond_scan_depth", "secondary", "additional_keys", "budget"}


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


def activated_policy(
    code: str, *, protected: bool = False, ignore_budget: bool = False, rank: int = 2, stays: bool = False
) -> ItemPolicy:
    """Return the budget policy of an entry the book activated with decision `code` (see the module docstring).
    `stays`: printed with the lore that is always active (the player character's own entry)."""
    return ItemPolicy(
        "constant_lore" if code == "constant" or stays else "recalled",
        "lore_activated",
        Tier.PROTECTED if protected else Tier.ACTIVATED,
        rank=0 if protected else rank,
        protected=protected,
        outside_budget=ignore_budget,
        shortenable=not ignore_budget,
    )


def activated_items(
    view: LoreActivationView,
    *,
    focus: list[str],
    macros: dict[str, str],
    make_item,
    activation_rank=DEFAULT_POLICY.activation_rank,
    player: str = "",
):
    """Return the context items of the activated entries, in prompt order, each with its `ItemPolicy`.

    `make_item(layer=, text=, reason=, why=, ref=, policy=)` makes one (`ContextItem.of`: it counts
    the tokens). A constant entry goes to the always-active section, the others to what this
    action recalled; a protected one is offered the budget first; `activation_rank` orders the rest.
    `player`: the player character, when in focus (the narrator's own focus): the entry naming them is
    in every prompt, activated this turn or not, protected and printed with the lore that is always
    active, where a prefix cache keeps it (not among what changes with each action).
    """
    focus_names = _names(focus)
    player_names = _names([player])
    items = []
    specs = list(view.result.activated)
    if player_names and not any(player_names & _names([s.title, *s.keys]) for s in specs):
        specs += [s for s in view.specs.values() if s.enabled and player_names & _names([s.title, *s.keys])][:1]
    for spec in specs:
        record = view.result.explanations[spec.entry_id]
        pending = "pending input" in (record.matched_in or "")
        names = _names([spec.title, *spec.keys])
        # The entry's own name in focus, as the entry writes it (its title before its keys).
        in_focus = [
            n.strip() for n in [spec.title, *spec.keys] if isinstance(n, str) and n.strip().lower() in focus_names
        ][:1]
        stays = bool(player_names & names)
        protected = pending or bool(in_focus) or stays
        text = fill(f"{spec.title}: {spec.text}" if spec.title else spec.text, macros)
        why = ("; ".join(record.reasons) or record.code) if record.included else "the player character's entry"
        if stays:
            why += "; the player character's entry, in every prompt while they are in focus"
        elif in_focus and not pending:
            why += f"; names “{in_focus[0]}”, in focus"
        rank = 0 if protected else activation_rank.get(record.code, 2)
        policy = activated_policy(
            record.code, protected=protected, ignore_budget=spec.ignore_budget, rank=rank, stays=stays
        )
        items.append(
            make_item(
                layer="lore",
                text=text,
                reason=f"lore activated: {why}",
                why={
                    "activation": record.code if record.included else "player",
                    "activation_rank": rank,
                    "matched_key": record.matched_key,
                    "matched_in": record.matched_in,
                    "via_entry": record.via_entry,
                    "in_focus": in_focus[:1],
                    # Where a narrator prompt places it (SillyTavern's position / depth / role).
                    "position": spec.position,
                    "depth": spec.depth,
                    "role": spec.role,
                    "insertion_order": spec.insertion_order,
                },
                ref={"entry_id": spec.entry_id},
                policy=policy,
            )
        )
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
        data.update(
            included=included,
            context=decisions,
            semantic_rank=next(
                (
                    i.why.get("final_rank")
                    for i in mine
                    if i.why.get("final_rank") is not None and not i.why.get("activation")
                ),
                None,
            ),
        )
        out.append(data)
    return out
