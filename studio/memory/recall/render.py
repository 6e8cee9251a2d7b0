"""The one renderer: an assembled memory context as the text the model reads, counted part by part.

`render_memory(context)` is the only function that turns a `MemoryContext` into text. The
narrator's prompt (the Console, the API's narrate and its stream, the prompt preview), the
Context viewer, the API's `text` and the memory proxy all print what it returns, so what the
studio shows, tests and measures is byte for byte what the model reads.

It prints the included items section by section in the order of the one layout
(`studio.memory.recall.layout.LAYOUT`), each under its heading, and a section that a layer
provider wrote after the budget was spent (the point of view's rules, who is on scene) from
`MemoryContext.section_texts`. Marks are the renderer's, on every layer:

- `[narrator-only]` before every item no character on scene knows (`why["narrator_only"]`,
  set by the point of view), whatever its section;
- the cuts an item's text carries ("[…]" of a window or a focus excerpt, "[… cut: …]" of a
  shortened entry, "[… the start of this turn is cut …]") are in its text and printed as is;
- story-ordered parts (facts, narrative memory) in turn order, under one heading per story
  time (`why["group"]`, `layout.group_heading`), the heading printed once for the items it dates;
- "(A new chapter begins.)" on the first turn of every chapter the recent turns show.

A section with nothing to print is left out, or says so (`Section.empty`: the recent turns
and what the action recalled always have a heading, so the prompt's shape does not move;
the recent turns not when the caller's own messages carry them, the memory proxy's chat).
`{{user}}` / `{{char}}` are filled with the context's macros (they are in the item texts
already; filling twice changes nothing). Each part is counted with the budget's counter
(`count_tokens`), and `RenderedMemory.split()` gives the part that stays the same from turn to
turn and the part that changes with each action (the memory proxy places them apart).
"""

from __future__ import annotations

from dataclasses import dataclass

from studio.memory.embeddings.tokens import count_tokens
from studio.memory.recall.layout import LAYOUT, Part, Section, group_heading, parts_of
from studio.memory.recall.macros import MacroNames

__all__ = ["NARRATOR_ONLY", "RenderedMemory", "RenderedPart", "item_lines", "render_memory"]

NARRATOR_ONLY = "[narrator-only] "
NEW_CHAPTER = "(A new chapter begins.)\n"
PART_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class RenderedPart:
    section: str
    text: str  # the section as printed, its heading first
    tokens: int
    per_action: bool


@dataclass(frozen=True)
class RenderedMemory:
    parts: tuple[RenderedPart, ...]

    @property
    def text(self) -> str:
        return PART_SEPARATOR.join(part.text for part in self.parts)

    @property
    def tokens(self) -> int:
        """The tokens of the whole text (the budget's counter)."""
        return count_tokens(self.text)

    def split(self) -> tuple[str, str]:
        """Return (the sections that stay the same from turn to turn, those that change with each action);
        joined by a blank line they are `text`."""
        stable = PART_SEPARATOR.join(part.text for part in self.parts if not part.per_action)
        changing = PART_SEPARATOR.join(part.text for part in self.parts if part.per_action)
        return stable, changing

    def as_dict(self) -> list[dict]:
        return [{"section": p.section, "tokens": p.tokens, "per_action": p.per_action} for p in self.parts]


def _mark(item) -> str:
    return NARRATOR_ONLY if item.why.get("narrator_only") else ""


def item_lines(part: Part, items: list) -> list[str]:
    """Return the lines (or blocks) of one part's included items as the model reads them."""
    if part.story_ordered:
        items = sorted(items, key=lambda i: (i.ref.get("turn_id") or 0, i.ref.get("fact_id") or 0))
    elif part.by_subject:
        items = sorted(items, key=lambda i: (i.why.get("subject") or "").casefold())
    if part.blocks:
        return [(NEW_CHAPTER if i.why.get("begins_chapter") else "") + _mark(i) + i.text for i in items]
    lines, group = [], None
    for item in items:
        if item.why.get("group") and item.why["group"] != group:
            lines.append(group_heading(item.why["group"]))
        group = item.why.get("group")
        lines.append(f"- {_mark(item)}{item.text}")
    return lines


def _section_body(section: Section, context) -> str:
    parts = parts_of(section)
    if not parts:
        return (context.section_texts.get(section.name) or "").strip()
    by_part = []
    for part in parts:
        items = [i for i in context.included if i.section == section.name and i.layer == part.layer]
        if not items:
            continue
        lines = item_lines(part, items)
        body = (PART_SEPARATOR if part.blocks else "\n").join(lines)
        by_part.append(f"{part.heading}\n{body}" if part.heading else body)
    return PART_SEPARATOR.join(by_part)


def render_memory(context) -> RenderedMemory:
    """Return the context's memory as the model reads it (the module docstring), counted part by part."""
    fill = MacroNames(**context.macros).fill if context.macros else (lambda text: text)
    rendered = []
    carried = bool(context.policy and context.policy.carried_turns)
    for section in LAYOUT:
        body = _section_body(section, context) or ("" if section.carried and carried else section.empty)
        if not body:
            continue
        text = fill(f"{section.heading}\n{body}")
        rendered.append(
            RenderedPart(section=section.name, text=text, tokens=count_tokens(text), per_action=section.per_action)
        )
    return RenderedMemory(parts=tuple(rendered))
