"""Items for the allocator's tests, with the budget policy their layer's provider would give them."""

from __future__ import annotations

from studio.memory.recall.context_items import ContextItem
from studio.memory.recall.context_lore import activated_policy


def budget_item(
    layer: str, tokens: int, *, activation: str = "", protected: bool = False, ignore_budget: bool = False, **why
) -> ContextItem:
    """An item of `tokens` tokens: activated lore (`activation`, a decision code) gets activated lore's policy."""
    policy = None
    if activation or protected or ignore_budget:
        policy = activated_policy(activation or "key", protected=protected, ignore_budget=ignore_budget)
        why["activation"] = activation or "key"
    return ContextItem(layer=layer, text="x", tokens=tokens, reason="", why=why, policy=policy)
