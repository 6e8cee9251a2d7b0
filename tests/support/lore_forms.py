"""The Lore Book pages' address and a filled lore form (every activation field at its default), for
the activation and regex-key view tests."""

from __future__ import annotations


def url(universe, suffix=""):
    """The address of `universe`'s Lore Book page `suffix` (`new/`, `tester/`, ...)."""
    return f"/universes/{universe.slug}/lore/{suffix}"


def form_data(prefix="", **values):
    """A lore form for Hesper Vale with `values` changed (None leaves a field out), names prefixed."""
    base = {
        "title": "Hesper Vale",
        "kind": "character",
        "text": "Runs the Copper Hood.",
        "keys": "Hesper, Vale",
        "activation_shown": "True",
        "probability": "100",
        "group_weight": "100",
        "insertion_order": "100",
        "depth": "4",
        "position": "0",
        "selective_logic": "0",
        "selective": "on",
        "enabled": "on",
        "use_probability": "on",
        "vectorized": "on",
        "sticky": "0",
        "cooldown": "0",
        "delay": "0",
        "delay_until_recursion": "0",
        "activate_only_after": "0",
        "activate_only_every": "0",
    }
    base.update(values)
    return {f"{prefix}{k}" if prefix else k: v for k, v in base.items() if v is not None}
