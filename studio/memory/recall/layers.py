"""The memory context's layers: registered providers, each returning candidates with their item policy.

A layer is one `LayerProvider`, registered once with `register_layer`; `build_memory_context`
(studio/memory/recall/context.py) runs every registered provider in registration order on one
`Assembly` (what the request asks and what the context knows: the save, the policy, the
horizon, who is in focus, the macros, the Lore Book's activation, the named time), hands all
their candidates to the one allocator (`studio.memory.recall.allocate`), then runs each
provider's `complete` hook, which may write a section's text after the budget is spent (the
point of view); that text is counted in the budget too (the allocator runs again on what is
left when it does not fit). Adding a layer is one registration: a provider, and, for a layer
the layout does not print yet, its `part` (where it prints, `layout.Part`) and the default
`ItemPolicy` of its items (`layout.register_part` records both).

The built-in providers, in the order they run (which is also their candidates' order within
a tier): the point of view (`studio.memory.knowledge.pov`: it checks the names asked for
first, and writes its text after the budget), the recent turns and the story so far
(`studio.memory.chapters.story`), mental models, beliefs, facts (living memory), narrative
memory (the hybrid search), the Lore Book's activated entries (constant ones print in their
own section), lore found by meaning (with one hop of links). A provider that has
nothing to give for a request (classic memory, no query text) says so in the context's notes.

Invariants: a provider writes only its own candidates and notes; the order of registration is
the order of the explain record; no provider decides `included` (only the allocator does,
except for items its layer knows are already in the prompt or have no text, which arrive cut
with the reason).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from studio.memory.chapters.story import Story, story_items
from studio.memory.recall import context_lore
from studio.memory.recall.context_items import (
    ContextItem,
    belief_items,
    fact_items,
    lore_items,
    mental_model_items,
    narrative_items,
)
from studio.memory.recall.focus import characters_absent
from studio.memory.recall.layout import ItemPolicy, Part, register_part, unregister_part
from studio.memory.recall.search import memory_search, query_record

__all__ = ["Assembly", "LayerProvider", "layer_providers", "register_layer", "unregister_layer"]


@dataclass
class Assembly:
    """One request's shared state, read by every provider (built by `build_memory_context`)."""

    game_save: Any
    policy: Any  # ContextPolicy
    context: Any  # the MemoryContext being built: notes, timings, queries, shown turns
    query_text: str
    focus_terms: list[str]
    subject_keys: list[str]
    subject_why: dict[str, str]
    focus_names: list[str]
    macros: dict[str, str]
    universe_meta: dict[str, str]
    focus: Any = None  # the request's `focus.Focus`: every subject in focus with its names (aliases) and shown name
    characters: Any = None  # the universe's `knowledge.names.CharacterIndex`, read once for the request
    lore_view: Any = None  # context_lore.LoreActivationView, None without a book
    prefer: Any = None  # the named time's TimePreference, None when the action names none
    vector_memory: Any = None
    story: Story = field(default_factory=Story)
    refused: dict[str, str] = field(default_factory=dict)  # entry id -> why lore found by meaning was not taken
    scratch: dict[str, Any] = field(default_factory=dict)  # what a provider reads once per request (its own keys)

    def fill(self, text: str) -> str:
        return context_lore.fill(text, self.macros)

    def timed(self, name: str, started: float) -> None:
        self.context.timings[name] = round((time.perf_counter() - started) * 1000, 2)


@dataclass(frozen=True)
class LayerProvider:
    """One layer of the memory context (see the module docstring)."""

    name: str
    provide: Callable[[Assembly], list[ContextItem]]
    complete: Callable[[Assembly], None] | None = None  # after the budget: write a section's text
    part: tuple[str, Part] | None = None  # (section, part) for a layer the layout does not print yet
    policy: ItemPolicy | None = None  # its items' default policy, with `part`


_PROVIDERS: dict[str, LayerProvider] = {}


def register_layer(provider: LayerProvider) -> LayerProvider:
    """Register `provider` (after those registered before it); raise ValueError for a name taken."""
    if provider.name in _PROVIDERS:
        raise ValueError(f"a layer named {provider.name!r} is registered already")
    if provider.part is not None:
        section, part = provider.part
        register_part(section, part, provider.policy)
    _PROVIDERS[provider.name] = provider
    return provider


def unregister_layer(name: str) -> None:
    """Remove the provider `name` (and the part it declared): a plugin that is turned off, a test."""
    provider = _PROVIDERS.pop(name, None)
    if provider is not None and provider.part is not None:
        unregister_part(provider.part[0], provider.part[1].layer)


def layer_providers() -> list[LayerProvider]:
    return list(_PROVIDERS.values())


# -- the built-in layers -------------------------------------------------------------------------


def _recent_turns(assembly: Assembly) -> list[ContextItem]:
    """The recent turns in full and the summaries that tell the story before them. A turn the caller's own
    messages carry (`ContextPolicy.carried_turns`: the memory proxy's chat) is cut: it is in the prompt once."""
    started = time.perf_counter()
    policy = assembly.policy
    story = assembly.story = story_items(
        assembly.game_save,
        horizon=assembly.context.turn,
        token_budget=policy.token_budget,
        **policy.window_kwargs(),
        make_item=ContextItem.of,
        fill=assembly.fill,
    )
    for item in story.turns:
        if item.included and item.ref["turn_id"] in policy.carried_turns:
            item.included = False
            item.cut = f"already in the prompt: the front end's own messages carry turn {item.ref['turn_id']}"
    assembly.context.shown_turns = [turn for turn in story.shown_turns if turn not in policy.carried_turns]
    assembly.context.chapter_start = story.chapter_start
    assembly.timed("story_ms", started)
    return story.turns


def _story_so_far(assembly: Assembly) -> list[ContextItem]:
    return assembly.story.summaries


def _living(build) -> Callable[[Assembly], list[ContextItem]]:
    """A living-memory layer: nothing in classic mode, nothing without a character in focus."""

    def provide(assembly: Assembly) -> list[ContextItem]:
        if not assembly.game_save.is_living or not assembly.subject_keys:
            return []
        started = time.perf_counter()
        items = build(assembly)
        assembly.context.timings["structured_ms"] = round(
            assembly.context.timings.get("structured_ms", 0.0) + (time.perf_counter() - started) * 1000, 2
        )
        return items

    return provide


def _aliases(assembly: Assembly) -> dict[str, tuple[str, ...]]:
    """{subject key: every name of that subject}: a character's memory is found under its title, keys and parts."""
    return {subject.key: subject.names for subject in assembly.focus.subjects} if assembly.focus else {}


def _mental_models(assembly: Assembly) -> list[ContextItem]:
    return mental_model_items(
        assembly.game_save, assembly.subject_keys, assembly.subject_why, aliases=_aliases(assembly)
    )


def _beliefs(assembly: Assembly) -> list[ContextItem]:
    if not assembly.game_save.beliefs_enabled:
        return []
    return belief_items(
        assembly.game_save,
        assembly.subject_keys,
        assembly.subject_why,
        assembly.context.turn,
        assembly.prefer,
        per_subject=assembly.policy.max_beliefs_per_subject,
        aliases=_aliases(assembly),
    )


def _facts(assembly: Assembly) -> list[ContextItem]:
    shown = {subject.key: subject.name for subject in assembly.focus.subjects} if assembly.focus else {}
    return fact_items(
        assembly.game_save,
        assembly.subject_keys,
        assembly.subject_why,
        assembly.context.turn,
        assembly.prefer,
        limit=assembly.policy.max_facts,
        aliases=_aliases(assembly),
        shown=shown,
    )


def _search(assembly: Assembly, name: str, **params):
    """Run one of the context's two memory searches; keep its record for Lore replay and its time."""
    outcome = memory_search(
        game_save=assembly.game_save, query_text=assembly.query_text, vector_memory=assembly.vector_memory, **params
    )
    recorded = {key: value for key, value in params.items() if key not in ("prefer", "expand_links")}
    assembly.context.queries.append(
        query_record(query_text=assembly.query_text, params=recorded, results=outcome.results)
    )
    assembly.context.timings[f"{name}_query_ms"] = round(outcome.stats.timings_ms.get("total", 0.0), 2)
    return outcome


def _narrative(assembly: Assembly) -> list[ContextItem]:
    """Narrative chunks found for the action: as many as the budget could hold (the budget, not k, decides)."""
    if not assembly.query_text.strip():
        return []
    policy, shown = assembly.policy, assembly.story.shown_turns
    # The turns shown in full come back from the search too and are left out of it; the refill pass may give
    # recall the whole budget.
    fill_k = min(policy.max_fill_k, policy.token_budget // policy.tokens_per_small_chunk)
    outcome = _search(
        assembly,
        "narrative",
        k=max(policy.k_narrative, fill_k + len(shown)),
        focus_terms=assembly.focus_terms or None,
        chunk_type=None,
        exclude_chunk_type="lore",
        prefer=assembly.prefer,
    )
    named = outcome.stats.named_time  # the query named a time: memory from it is preferred
    if named:
        assembly.context.notes.append(named[:1].upper() + named[1:] + ".")
    return narrative_items(
        assembly.game_save, outcome.results, assembly.macros, shown=set(shown) | set(policy.carried_turns)
    )


def _activated_lore(assembly: Assembly) -> list[ContextItem]:
    if assembly.lore_view is None:
        return []
    player = assembly.macros.get("user") or ""
    in_focus = player and player.casefold() in {name.casefold() for name in assembly.focus_names}
    items = context_lore.activated_items(
        assembly.lore_view,
        focus=assembly.focus_names,
        macros=assembly.macros,
        make_item=ContextItem.of,
        activation_rank=assembly.policy.activation_rank,
        player=player if in_focus else "",
    )
    assembly.scratch["activated_entries"] = {item.ref["entry_id"] for item in items}
    return items


def _lore_by_meaning(assembly: Assembly) -> list[ContextItem]:
    """Lore found by meaning, with one hop of links, where the book's own rules allow it."""
    if not assembly.query_text.strip():
        return []

    outcome = _search(
        assembly,
        "lore",
        k=assembly.policy.k_lore,
        focus_terms=assembly.focus_terms or None,
        chunk_type="lore",
        exclude_chunk_type=None,
        expand_links=True,
        prefer=None,
    )  # lore has no story time
    view = assembly.lore_view
    absent = characters_absent(assembly.characters, assembly.focus) if view and assembly.focus else {}
    items = []
    for item in lore_items(outcome.results, view, assembly.macros):
        entry_id = item.ref.get("entry_id")
        allowed, why = context_lore.semantic_allowed(view, entry_id)
        if allowed and entry_id in assembly.scratch.get("activated_entries", ()):
            allowed, why = False, "already in as the player character's entry"
        if allowed and entry_id in absent:
            allowed, why = (
                False,
                (
                    f"a character's description enters when {absent[entry_id]} "
                    "is on scene (in focus) or named in the action"
                ),
            )
        if allowed:
            items.append(item)
        else:
            assembly.refused.setdefault(entry_id, why)
    return items


def _point_of_view(assembly: Assembly) -> list[ContextItem]:
    """Refuse a point of view naming no known character, before any other work. It adds no candidates: its
    text depends on what the budget let in (`complete`)."""
    from studio.memory.knowledge.pov import pov_check

    pov_check(assembly)
    return []


def _point_of_view_text(assembly: Assembly) -> None:
    """Who knows what: mark what no character on scene knows, and write the rules and who is on scene."""
    from studio.memory.knowledge.pov import pov_complete

    pov_complete(assembly)


for _provider in (
    LayerProvider("point_of_view", _point_of_view, complete=_point_of_view_text),
    LayerProvider("recent_turns", _recent_turns),
    LayerProvider("story_so_far", _story_so_far),
    LayerProvider("mental_models", _living(_mental_models)),
    LayerProvider("beliefs", _living(_beliefs)),
    LayerProvider("facts", _living(_facts)),
    LayerProvider("narrative", _narrative),
    LayerProvider("activated_lore", _activated_lore),
    LayerProvider("lore_by_meaning", _lore_by_meaning),
):
    register_layer(_provider)
