"""The memory context by point of view: who is on scene, what only some of them know; secrets marked.

`pov_complete(assembly)` is the point-of-view layer's hook (`studio.memory.recall.layers`): it
runs after the budget has let items in, and is paid from the same budget (the allocator
decides again on what its text leaves when it does not fit). It takes the characters on scene
— the `pov` names asked for (`resolve_pov`: a name no character answers to is refused, with
the known characters named), or, when none are given (`pov=None`, automatic), the characters
present at the save's current turn, the player character when they act next
(`ContextPolicy.player_on_scene`), those the input names and the focus terms that are
characters — and, for each:

- the context's included items the character knows (`KnowledgeView`), each with why;
- up to `max_recalled` more facts the character knows that bear on the action (they share an
  index term with the input) and that the context did not already hold.

Every included item that no character on scene knows is marked narrator-only (`why`, printed
as `[narrator-only]` by the renderer on every layer): the narrator may use it to narrate, and
the rules tell it that no character reveals it. Summaries and mental models are the
narrator's synthesis and are marked the same way.

What it writes (the layout's two point-of-view sections, `MemoryContext.section_texts`):
- `pov_rules`: the rules, once, before the memory they apply to (they change only when the
  scene empties or fills, so a prefix cache keeps them);
- `on_scene`: who is on scene, how many items are narrator-only, and per character what only
  some of those on scene know. An item every character on scene knows is common knowledge:
  it is listed nowhere. An item shown above is *named*, not repeated ("Turns 5-8", a lore
  entry's title, the first words of a chunk): the list costs a few tokens an item, not the
  item again. The facts recalled for a character alone, not shown above, are listed whole.

`sections` keeps every known item with its whole text (the API, the viewer, the bench), and
`explain` one line per (item, character): in the section or left out, and why ("Mira was not
present at turn 12"; "secret; revealed to Kael at turn 20").

Automatic mode does nothing for a save with no presence, no reveals and no `known_by` in its
book, so a save that does not use the feature gets the context it always had.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from studio.memory.embeddings.tokens import count_tokens
from studio.memory.knowledge.derive import Knowing, KnowledgeView
from studio.memory.knowledge.names import CharacterIndex, fold
from studio.memory.recall.query_params import InvalidParameters
from studio.memory.retrieval.lexical import index_terms

__all__ = ["POV_RULES", "PovContext", "item_knowing", "item_label", "on_scene", "pov_complete", "resolve_pov"]

POV_RULES = (
    "The narrator knows everything in this memory. The characters on scene (named at its end, before the "
    "action) know every item of it that is not marked [narrator-only], except an item named there under some "
    "of them: only those know it. Each character speaks and acts only from what they know. No character "
    "reveals, hints at or guesses an item marked [narrator-only]: only the narration may use it."
)
QUOTE_WORDS = 8  # the first words that name a chunk shown above in a character's list


@dataclass
class PovContext:
    turn: int
    characters: list[dict[str, str]] = field(default_factory=list)  # {"name", "why"} on scene
    sections: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    narrator_only: list[dict[str, Any]] = field(default_factory=list)
    explain: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        """The tokens of its text (the budget paid them: `MemoryContext.section_tokens`)."""
        return count_tokens(self.as_text()) if self.characters else 0

    def rules_text(self) -> str:
        """The rules (the `pov_rules` section's text), '' when nobody is on scene."""
        return POV_RULES if self.characters else ""

    def scene_text(self) -> str:
        """Who is on scene and what only some of them know (the `on_scene` section's text)."""
        if not self.characters:
            return ""
        names = ", ".join(p["name"] for p in self.characters)
        marked = f" {len(self.narrator_only)} item(s) above are [narrator-only]." if self.narrator_only else ""
        return "\n\n".join([f"On scene: {names}.{marked}", *self._knows()])

    def as_text(self) -> str:
        return "\n\n".join(text for text in (self.rules_text(), self.scene_text()) if text)

    def _knows(self) -> list[str]:
        blocks = []
        for person in self.characters:
            mine = [i for i in self.sections.get(person["name"], []) if not i.get("shared")]
            shown = _labels([i for i in mine if not i.get("recalled")])
            if shown:
                blocks.append(f"### {person['name']} knows\n" + "\n".join(f"- {line}" for line in shown))
            recalled = [f"- {i['text']}" for i in mine if i.get("recalled")]
            if recalled:
                blocks.append(f"### {person['name']} also knows\n" + "\n".join(recalled))
        return blocks

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "tokens": self.tokens, "text": self.as_text()}


def _labels(items: list[dict[str, Any]]) -> list[str]:
    """Name each item shown above in a few words; consecutive recent turns as one range ("Turns 5-8")."""
    labels, turns = [], []

    def flush() -> None:
        if turns:
            labels.append(f"Turn {turns[0]}" if len(turns) == 1 else f"Turns {turns[0]}-{turns[-1]}")
            turns.clear()

    for item in items:
        turn = int(item["ref"].get("turn_id") or 0)
        if item["layer"] == "chapter":
            if turns and turn != turns[-1] + 1:
                flush()
            turns.append(turn)
            continue
        flush()
        labels.append(item_label(item))
    flush()
    return labels


def item_label(item: dict[str, Any]) -> str:
    """How a character's list names an item shown above: a lore entry's title, a chunk's first words and turn,
    a recent turn's number; a fact or a belief by itself. `item`: {"text", "layer", "ref", "title"}."""
    layer, text = item["layer"], item["text"]
    if layer == "chapter":
        return f"Turn {item['ref'].get('turn_id')}"
    if layer == "lore":
        return item.get("title") or text.split(":", 1)[0]
    if layer == "narrative":
        words = re.sub(r"^\(turn \d+\) ", "", text).split()
        quote = " ".join(words[:QUOTE_WORDS]) + ("…" if len(words) > QUOTE_WORDS else "")
        return f"“{quote}” (turn {item['ref'].get('turn_id')})"
    return text  # facts and beliefs are a sentence: named by themselves


def resolve_pov(index: CharacterIndex, names, *, known: list[str]) -> tuple[str, ...]:
    """Return the canonical names of the point of view `names`; raise InvalidParameters naming the known characters
    for a name no character answers to (`known`: every character the save or its book knows)."""
    known_folded = {fold(name) for name in known}
    unknown = [name for name in names if not index.is_known(name) and fold(name) not in known_folded]
    if unknown:
        listed = (
            ", ".join(known) if known else "none (the Lore Book has no Character entry and no player character is set)"
        )
        shared = [
            f" “{n}” could be {' or '.join(index.match(n).candidates)}." for n in unknown if index.match(n).ambiguous
        ]
        raise InvalidParameters(
            {
                "pov": f"No character is called {', '.join(f'“{n}”' for n in unknown)}."
                + "".join(shared)
                + f" The known characters: {listed}."
            }
        )
    return tuple(index.resolve(name) for name in names)


def on_scene(view: KnowledgeView, *, pov, query_text: str, focus_terms: list[str]) -> list[dict[str, str]]:
    """Return the characters on scene, each with why: the `pov` names, or present / acting / named / in focus."""
    index = view.index
    chosen: dict[str, dict[str, str]] = {}

    def add(name: str, why: str) -> None:
        canonical = index.resolve(name)
        if canonical and fold(canonical) not in chosen:
            chosen[fold(canonical)] = {"name": canonical, "why": why}

    if pov is not None:
        for name in pov:
            add(name, "point of view asked for")
        return list(chosen.values())
    for name in view.present_at(view.horizon):
        add(name, f"present at turn {view.horizon}")
    if view.player and query_text.strip():
        add(view.player, "the player character, acting this turn")
    for name in index.mentioned_in(query_text):
        add(name, "named in the input")
    for term in focus_terms:
        if index.is_known(term):  # a title, a key or a part of a title no one else holds (`names`: the one rule)
            add(term, "in focus")
    return list(chosen.values())


def item_knowing(view: KnowledgeView, item, character: str, beliefs: dict[int, Any]) -> Knowing | None:
    """Return whether `character` knows a context item (None: a mental model, the narrator's own)."""
    ref, layer = item.ref or {}, item.layer
    if layer == "fact":
        return view.fact(character, int(ref.get("fact_id") or 0), int(ref.get("turn_id") or 0))
    if layer in ("narrative", "chapter"):  # a chunk of a turn, or the turn shown in full
        return view.narrative(character, int(ref.get("turn_id") or 0))
    if layer == "story":
        return Knowing(False, "a summary is the narrator's synthesis, not a character's")
    if layer == "lore":
        return view.entry(character, ref.get("entry_id") or "")
    if layer == "belief":
        belief = beliefs.get(int(ref.get("observation_id") or 0))
        if belief is None:
            return Knowing(False, "belief not found")
        return view.belief(character, holder=belief.holder, sources=belief.sources or [])
    return None


def _view(assembly) -> KnowledgeView:
    """The request's `KnowledgeView`, read once however often the budget is decided again."""
    view = assembly.scratch.get("knowledge_view")
    if view is None:
        from studio.memory.knowledge.names import character_index

        index = assembly.characters or character_index(
            assembly.game_save.universe, save=assembly.game_save, universe_meta=assembly.universe_meta
        )
        view = assembly.scratch["knowledge_view"] = KnowledgeView(
            assembly.game_save, horizon=assembly.context.turn, index=index
        )
    return view


def pov_check(assembly) -> None:
    """Refuse a point of view naming no known character (before any work); keep the canonical names."""
    names = assembly.policy.pov
    if names:
        view = _view(assembly)
        assembly.scratch["pov"] = resolve_pov(view.index, names, known=view.characters())


def pov_complete(assembly) -> None:
    """Mark what no character on scene knows; write the rules and who is on scene (the module docstring)."""
    context, policy = assembly.context, assembly.policy
    for item in context.items:  # the budget may have decided again: marks are made afresh
        item.why.pop("narrator_only", None)
    context.pov = None
    if policy.pov is not None and not policy.pov:
        return  # the point of view was turned off
    view = _view(assembly)
    if policy.pov is None and not view.has_data():
        return
    pov = assembly.scratch.get("pov", policy.pov)
    result = PovContext(turn=context.turn)
    context.pov = result
    result.characters = on_scene(view, pov=pov, query_text=assembly.query_text, focus_terms=assembly.focus_terms)
    if not result.characters:
        result.notes.append("No character on scene: nobody present, acting, named in the input or in focus.")
        return
    _sections(view, result, [i for i in context.items if i.included])
    _recall_known_facts(
        view, result, assembly.query_text, [i for i in context.items if i.included], limit=policy.max_recalled
    )
    context.section_texts["pov_rules"] = result.rules_text()
    context.section_texts["on_scene"] = result.scene_text()


def _sections(view: KnowledgeView, result: PovContext, included: list) -> None:
    """Fill each character's section, the explain record and the narrator-only marks from the included items."""
    from studio.memory.models import Observation

    belief_ids = [
        int(i.ref.get("observation_id")) for i in included if i.layer == "belief" and i.ref.get("observation_id")
    ]
    beliefs = {b.pk: b for b in Observation.all_objects.filter(pk__in=belief_ids)}
    names = [c["name"] for c in result.characters]
    # The presence of the turns these items tell of, in one read (not the save's whole history).
    view.prefetch(
        [int(i.ref.get("turn_id") or 0) for i in included if (i.ref or {}).get("turn_id")]
        + [int(source.get("turn_id") or 0) for b in beliefs.values() for source in b.sources or []]
    )
    for position, item in enumerate(included):
        knowers = []
        for name in names:
            knowing = item_knowing(view, item, name, beliefs)
            reason = knowing.why if knowing else "a mental model is the narrator's synthesis, not a character's"
            known = bool(knowing and knowing.known)
            result.explain.append(
                {
                    "item": position,
                    "layer": item.layer,
                    "ref": item.ref,
                    "character": name,
                    "in_section": known,
                    "why": reason,
                }
            )
            if known:
                knowers.append(name)
                result.sections.setdefault(name, []).append(
                    {
                        "text": item.text,
                        "layer": item.layer,
                        "ref": item.ref,
                        "why": reason,
                        "title": item.why.get("title") or "",
                    }
                )
        if len(knowers) == len(names):
            for name in names:  # known to everyone on scene: common knowledge, listed nowhere
                result.sections[name][-1]["shared"] = True
        if not knowers:
            item.why["narrator_only"] = True
            result.narrator_only.append(
                {
                    "text": item.text,
                    "layer": item.layer,
                    "ref": item.ref,
                    "why": "; ".join(e["why"] for e in result.explain[-len(names) :]),
                }
            )


def _recall_known_facts(view: KnowledgeView, result: PovContext, query_text: str, included, *, limit: int) -> None:
    """Add, per character, up to `limit` known facts sharing an index term with the input (listed whole)."""
    from studio.memory.models import Fact

    terms = set(index_terms(query_text or ""))
    if not terms:
        return
    held = {int(i.ref["fact_id"]) for i in included if i.layer == "fact" and i.ref.get("fact_id")}
    facts = list(
        Fact.objects.filter(game_save_id=view.save.pk, turn_id__lte=view.horizon)
        .exclude(pk__in=held)
        .order_by("-turn_id", "-id")[:2000]
    )
    scored = []
    for fact in facts:
        overlap = len(terms & set(index_terms(fact.statement + " " + " ".join(fact.entities or []))))
        if overlap:
            scored.append((overlap, fact))
    scored.sort(key=lambda pair: (-pair[0], -pair[1].turn_id, -pair[1].pk))
    view.prefetch([fact.turn_id for _overlap, fact in scored])
    for person in result.characters:
        name, added = person["name"], 0
        for overlap, fact in scored:
            if added >= limit:
                break
            knowing = view.fact(name, fact.pk, fact.turn_id)
            ref = {"fact_id": fact.pk, "turn_id": fact.turn_id}
            if not knowing.known:
                continue
            added += 1
            why = f"recalled: shares {overlap} term{'s' if overlap != 1 else ''} with the input; {knowing.why}"
            result.sections.setdefault(name, []).append(
                {
                    "text": f"(turn {fact.turn_id}) {fact.statement}",
                    "layer": "fact",
                    "ref": ref,
                    "why": why,
                    "recalled": True,
                }
            )
            result.explain.append(
                {"item": None, "layer": "fact", "ref": ref, "character": name, "in_section": True, "why": why}
            )


def pov_filter_results(*, game_save, results: list[dict], pov, horizon: int) -> tuple[list[dict], list[dict]]:
    """Keep the search hits at least one of the `pov` characters knows; say why for the rest.

    A narrative chunk is known to a character present at its turn; a lore chunk to one who
    knows its entry (`KnowledgeView`). Return (kept hits, [{"id", "why"}] left out).
    """
    view = KnowledgeView(game_save, horizon=horizon)
    names = [view.index.resolve(name) for name in pov]
    view.prefetch([int(result.get("turn_id") or 0) for result in results])
    kept, left_out = [], []
    for result in results:
        entry_id = result.get("entry_id") or (result.get("metadata") or {}).get("entry_id")
        verdicts = [
            view.entry(n, entry_id) if entry_id else view.narrative(n, int(result.get("turn_id") or 0)) for n in names
        ]
        if any(v.known for v in verdicts):
            kept.append(
                {**result, "pov": [{"character": n, "known": v.known, "why": v.why} for n, v in zip(names, verdicts)]}
            )
        else:
            left_out.append({"id": result.get("id"), "why": "; ".join(v.why for v in verdicts)})
    return kept, left_out
