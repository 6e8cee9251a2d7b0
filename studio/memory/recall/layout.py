"""The one layout of the memory context: what the model reads in which order, and how each item
is offered the budget. Every ordering of the context is declared here and nowhere else.

`LAYOUT` lists the prompt's sections in the order the model reads them, from what changes
least to what changes most, so a model server's prefix cache reuses most of the previous
turn's prompt (docs/long-play.md, "The prompt, ordered for prefix caches"):

1. lore that is always active (constant entries);
2. the point of view's rules (who knows what; they change only when the scene empties or fills);
3. the story so far (summaries: one is appended when a chapter closes);
4. mental models, by subject;
5. the recent turns, in order (each turn appends one; the window moves a few turns at a time);
6. what this action recalled: beliefs, facts, narrative memory, lore (activated or found);
7. who is on scene and what only some of them know.

A section is `per_action` from the first one that changes with each action: everything the
prompt lays out from there is read anew by a prefix cache, so the cap on what changes with
each action (`ContextPolicy.cap_recall`) counts its items. `Part`s say how a layer is printed
inside its section (a sub-heading, story order under story-time headings, bullets or blocks).

`Tier` is the other ordering, the budget's: which items are offered it first
(`studio.memory.recall.allocate`). `ItemPolicy` is an item's typed budget policy: its
section, share class, tier and rank within it, and whether it spends the part of the budget
kept for recall, may take what the other classes left (refill), is protected (named by the
action or in focus) or ignores the budget. A provider (`studio.memory.recall.layers`) gives
its items one; nothing about the budget travels in an item's `why` (the explain record).

Invariants: every section name is unique; every item's section is declared here; what the
action recalled is offered in rounds in the recall hierarchy's order (`RECALL_LAYERS`).
Pure: no Django.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

__all__ = [
    "LAYOUT",
    "LAYERS",
    "ItemPolicy",
    "Part",
    "RECALL_LAYERS",
    "SECTIONS",
    "Section",
    "Tier",
    "group_heading",
    "layer_policy",
    "parts_of",
    "register_part",
    "unregister_part",
]


class Tier(IntEnum):
    """Which items the budget is offered first (lower first); within a tier, by `ItemPolicy.rank`."""

    PROTECTED = 0  # lore the action names, or that names a character in focus: before every other layer
    RECENT = 1  # the recent turns (the window planned their share)
    STORY = 2  # the summaries, newest first (the share keeps the nearest past)
    ACTIVATED = 3  # lore the Lore Book activated (constant, keys, sticky, recursion), by activation rank
    RECALL = 4  # what the action recalled, in rounds: the best of every layer, then the second, ...


@dataclass(frozen=True)
class Part:
    """How one layer is printed inside its section."""

    layer: str
    title: str  # the layer's name on the Context viewer
    heading: str = ""  # a sub-heading inside the section ("### Facts"), "" for none
    story_ordered: bool = False  # listed by turn, under one heading per story time (`why["group"]`)
    by_subject: bool = False  # listed by subject (a stable order for a prefix cache)
    blocks: bool = False  # whole blocks separated by a blank line (the recent turns), not "- " lines


@dataclass(frozen=True)
class Section:
    """One section of the prompt's memory, in the order the model reads them."""

    name: str
    heading: str
    per_action: bool  # changes with each action: a prefix cache reads it anew
    parts: tuple[Part, ...] = ()
    empty: str = ""  # printed when it has nothing ("" : the section is left out)
    carried: bool = False  # the caller's own messages may carry it (the proxy's chat): then no `empty` text


LAYOUT: tuple[Section, ...] = (
    Section("constant_lore", "## Lore (always active)", False, (Part("lore", "Lore (always active)"),)),
    Section("pov_rules", "## Point of view", False),
    Section("story", "## The story so far", False, (Part("story", "The story so far"),)),
    Section("mental_models", "## Mental models", False, (Part("mental_model", "Mental models", by_subject=True),)),
    Section(
        "recent_turns",
        "## Recent turns",
        False,
        (Part("chapter", "Recent turns", blocks=True),),
        empty="(none yet: this is the first turn)",
        carried=True,
    ),
    Section(
        "recalled",
        "## Recalled for this action",
        True,
        (
            Part("belief", "Beliefs", "### Beliefs"),
            Part("fact", "Facts", "### Facts", story_ordered=True),
            Part("narrative", "Narrative memory", "### Narrative memory", story_ordered=True),
            Part("lore", "Lore", "### Lore"),
        ),
        empty="(nothing recalled for this action)",
    ),
    Section("on_scene", "## On scene", True),
)
SECTIONS: dict[str, Section] = {section.name: section for section in LAYOUT}
# Every item layer once, in the order the prompt first prints it (the viewer's and the API's order).
LAYERS: tuple[str, ...] = tuple(dict.fromkeys(part.layer for section in LAYOUT for part in section.parts))
# The layers what the action recalls comes from, in the order of its rounds: the seed's recall hierarchy,
# most synthetic first (`axiom.mental_models`).
RECALL_LAYERS: tuple[str, ...] = ("mental_model", "belief", "fact", "narrative", "lore")
assert len(SECTIONS) == len(LAYOUT) and all(layer in LAYERS for layer in RECALL_LAYERS)


@dataclass(frozen=True)
class ItemPolicy:
    """An item's budget policy (see the module docstring); `studio.memory.recall.allocate` reads it."""

    section: str
    budget_class: str
    tier: Tier
    recall: bool = False  # what the action recalled: spends the part of the budget kept for recall
    refill: bool = True  # may take what the other classes and the reservation left (pass 4)
    rank: int = 0  # the order within its tier (activation rank, a summary's -first turn)
    protected: bool = False  # named by the action or in focus: offered first, only the whole budget bounds it
    outside_budget: bool = False  # an entry that ignores the budget: always in, counted apart
    shortenable: bool = False  # an entry longer than its share is represented by a passage or its first sentences

    @property
    def per_action(self) -> bool:
        """Whether the prompt prints it where everything changes with each action (the cap counts it)."""
        return SECTIONS[self.section].per_action

    def as_dict(self) -> dict:
        return {
            "section": self.section,
            "budget_class": self.budget_class,
            "tier": self.tier.name.lower(),
            "rank": self.rank,
            "recall": self.recall,
            "refill": self.refill,
            "protected": self.protected,
            "outside_budget": self.outside_budget,
            "per_action": self.per_action,
        }


_LAYER_POLICY = {
    "story": ItemPolicy("story", "summary", Tier.STORY, refill=False),
    "chapter": ItemPolicy("recent_turns", "chapter", Tier.RECENT, refill=False),
    "mental_model": ItemPolicy("mental_models", "mental_model", Tier.RECALL, recall=True, shortenable=True),
    "belief": ItemPolicy("recalled", "belief", Tier.RECALL, recall=True, shortenable=True),
    "fact": ItemPolicy("recalled", "fact", Tier.RECALL, recall=True, shortenable=True),
    "narrative": ItemPolicy("recalled", "narrative", Tier.RECALL, recall=True),
    "lore": ItemPolicy("recalled", "lore", Tier.RECALL, recall=True, shortenable=True),
}


def layer_policy(layer: str) -> ItemPolicy:
    """Return the policy an item of `layer` gets unless its provider gives another (activated lore does)."""
    return _LAYER_POLICY[layer]


def parts_of(section: Section) -> tuple[Part, ...]:
    """Return the parts printed in `section`: the declared ones, then those layers registered since."""
    return section.parts + tuple(_REGISTERED_PARTS.get(section.name, ()))


_REGISTERED_PARTS: dict[str, list[Part]] = {}


def register_part(section: str, part: Part, policy: ItemPolicy) -> None:
    """Declare a new layer's place (`part` at the end of `section`) and its items' default policy.

    `studio.memory.recall.layers.register_layer` calls it for a provider of a new layer; raise
    ValueError for an unknown section or a layer declared twice.
    """
    if section not in SECTIONS or policy.section != section:
        raise ValueError(f"unknown section {section!r} (or the policy's section differs): one of {', '.join(SECTIONS)}")
    if part.layer in _LAYER_POLICY:
        raise ValueError(f"the layer {part.layer!r} is declared already")
    _REGISTERED_PARTS.setdefault(section, []).append(part)
    _LAYER_POLICY[part.layer] = policy


def unregister_part(section: str, layer: str) -> None:
    """Forget a layer `register_part` declared (`layers.unregister_layer`); the declared layers stay."""
    parts = _REGISTERED_PARTS.get(section, [])
    if any(part.layer == layer for part in parts):
        _REGISTERED_PARTS[section] = [part for part in parts if part.layer != layer]
        _LAYER_POLICY.pop(layer, None)


def group_heading(story_time: str) -> str:
    """The heading the items of one story time are listed under (story-ordered parts)."""
    return f"[{story_time}]"
