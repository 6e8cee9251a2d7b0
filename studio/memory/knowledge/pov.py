"""The memory context by point of view: per on-scene character, what they know; secrets marked.

`pov_sections` runs after the memory context is assembled (`build_memory_context` calls it,
one delimited hook). It takes the characters on scene — the `pov` names asked for, or, when
none are given (`pov=None`, automatic), the characters present at the save's current turn,
those the input names and the focus terms that are characters — and, for each:

- the context's included items the character knows (`KnowledgeView`), each with why;
- up to `MAX_RECALLED` more facts the character knows that bear on the action (they share
  an index term with the input) and that the context did not already hold.

The prompt text stays small: an item every character on scene knows is listed once (in its
layer, unmarked); each section lists only what that character knows and some other on-scene
character does not (`shared` marks the rest in `sections`, which keep every known item).

Every included item that no character on scene knows is marked narrator-only: the narrator
may use it to narrate, and the prompt tells it that no character reveals it. Mental models
are the narrator's synthesis and are marked the same way. The explain record has one line per
(item, character): in the section or left out, and why ("Mira was not present at turn 12";
"secret; revealed to Kael at turn 20").

Automatic mode does nothing for a save with no presence, no reveals and no `known_by` in its
book, so a save that does not use the feature gets the context it always had. The sections'
tokens are counted apart from the context's budget (`PovContext.tokens`).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from studio.memory.embeddings.tokens import count_tokens
from studio.memory.knowledge.derive import Knowing, KnowledgeView
from studio.memory.knowledge.names import fold
from studio.memory.retrieval.lexical import index_terms

__all__ = ["MAX_RECALLED", "PovContext", "pov_sections", "on_scene", "item_knowing"]

MAX_RECALLED = 6
POV_INSTRUCTION = (
    "The narrator knows everything in this memory. The characters on scene know every item above that is "
    "not marked [narrator-only], except an item also listed below under some of them: only those know it. "
    "Each character speaks and acts only from what they know. No character reveals, hints at or guesses an item marked [narrator-only]: only "
    "the narration may use it."
)
# The same rules for a prompt that states them once at its head, before the memory they apply
# to, and names who is on scene at its end (`head_text` / `scene_text`; the narrator's prompt:
# the rules then stay in the part of it a model server's prefix cache reuses from turn to turn).
POV_RULES = (
    "The narrator knows everything in this memory. The characters on scene (named at its end, before the "
    "action) know every item of it that is not marked [narrator-only], except an item listed there under some "
    "of them: only those know it. Each character speaks and acts only from what they know. No character "
    "reveals, hints at or guesses an item marked [narrator-only]: only the narration may use it."
)


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
        return count_tokens(self.as_text()) if self.characters else 0

    def as_text(self) -> str:
        """The point of view as one block after the memory: the rules, who is on scene, what only some know."""
        if not self.characters:
            return ""
        return "\n\n".join(["## Point of view\n" + POV_INSTRUCTION + "\n" + self._on_scene(), *self._knows()])

    def head_text(self) -> str:
        """The rules alone, for the head of a prompt (`POV_RULES`); '' when nobody is on scene."""
        return "## Point of view\n" + POV_RULES if self.characters else ""

    def scene_text(self) -> str:
        """Who is on scene and what only some of them know, for the end of a prompt whose head has `head_text`."""
        if not self.characters:
            return ""
        return "\n\n".join(["## On scene\n" + self._on_scene(), *self._knows()])

    def _on_scene(self) -> str:
        names = ", ".join(p["name"] for p in self.characters)
        marked = f" {len(self.narrator_only)} item(s) above are [narrator-only]." if self.narrator_only else ""
        return f"On scene: {names}.{marked}"

    def _knows(self) -> list[str]:
        blocks = []
        if len(self.characters) > 1 or any(not i.get("shared") for s in self.sections.values() for i in s):
            for person in self.characters:
                lines = [f"- {i['text']}" for i in self.sections.get(person["name"], []) if not i.get("shared")]
                if lines:
                    blocks.append(f"### {person['name']} knows\n" + "\n".join(lines))
        return blocks

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "tokens": self.tokens, "text": self.as_text()}


def on_scene(view: KnowledgeView, *, pov, query_text: str, focus_terms: list[str]) -> list[dict[str, str]]:
    """Return the characters on scene, each with why: the `pov` names, or present / named / in focus."""
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
    for name in index.mentioned_in(query_text):
        add(name, "named in the input")
    for term in focus_terms:
        if fold(term) in index.characters:
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


def pov_sections(*, game_save, context, pov=None, query_text: str = "", focus_terms: list[str] | None = None,
                 view: KnowledgeView | None = None, universe_meta=None) -> PovContext | None:
    """Return the point-of-view sections of an assembled memory context (None: nothing to add)."""
    from studio.memory.models import Fact, Observation

    if view is None:
        from studio.memory.knowledge.names import character_index

        index = character_index(game_save.universe, save=game_save, universe_meta=universe_meta)
        view = KnowledgeView(game_save, horizon=context.turn, index=index)
    if pov is None and not view.has_data():
        return None
    result = PovContext(turn=context.turn)
    result.characters = on_scene(view, pov=pov, query_text=query_text, focus_terms=list(focus_terms or []))
    if not result.characters:
        result.notes.append("No character on scene: nobody present, named in the input or in focus.")
        return result
    included = [i for i in context.items if i.included]
    belief_ids = [int(i.ref.get("observation_id")) for i in included if i.layer == "belief" and i.ref.get("observation_id")]
    beliefs = {b.pk: b for b in Observation.all_objects.filter(pk__in=belief_ids)}
    names = [c["name"] for c in result.characters]
    for position, item in enumerate(included):
        knowers = []
        for name in names:
            knowing = item_knowing(view, item, name, beliefs)
            reason = knowing.why if knowing else "a mental model is the narrator's synthesis, not a character's"
            known = bool(knowing and knowing.known)
            result.explain.append({"item": position, "layer": item.layer, "ref": item.ref, "character": name,
                                   "in_section": known, "why": reason})
            if known:
                knowers.append(name)
                result.sections.setdefault(name, []).append(
                    {"text": item.text, "layer": item.layer, "ref": item.ref, "why": reason})
        if len(knowers) == len(names):
            for name in names:  # known to everyone on scene: the prompt lists it once, above
                result.sections[name][-1]["shared"] = True
        if not knowers:
            item.why["narrator_only"] = True
            result.narrator_only.append({"text": item.text, "layer": item.layer, "ref": item.ref,
                                         "why": "; ".join(e["why"] for e in result.explain[-len(names):])})
    _recall_known_facts(view, result, query_text, included, Fact)
    return result


def _recall_known_facts(view: KnowledgeView, result: PovContext, query_text: str, included, fact_model) -> None:
    """Add, per character, up to MAX_RECALLED known facts sharing an index term with the input."""
    terms = set(index_terms(query_text or ""))
    if not terms:
        return
    held = {int(i.ref["fact_id"]) for i in included if i.layer == "fact" and i.ref.get("fact_id")}
    facts = list(fact_model.objects.filter(game_save_id=view.save.pk, turn_id__lte=view.horizon)
                 .exclude(pk__in=held).order_by("-turn_id", "-id")[:2000])
    scored = []
    for fact in facts:
        overlap = len(terms & set(index_terms(fact.statement + " " + " ".join(fact.entities or []))))
        if overlap:
            scored.append((overlap, fact))
    scored.sort(key=lambda pair: (-pair[0], -pair[1].turn_id, -pair[1].pk))
    for person in result.characters:
        name, added = person["name"], 0
        for overlap, fact in scored:
            if added >= MAX_RECALLED:
                break
            knowing = view.fact(name, fact.pk, fact.turn_id)
            ref = {"fact_id": fact.pk, "turn_id": fact.turn_id}
            if not knowing.known:
                continue
            added += 1
            why = f"recalled: shares {overlap} term{'s' if overlap != 1 else ''} with the input; {knowing.why}"
            result.sections.setdefault(name, []).append(
                {"text": f"(turn {fact.turn_id}) {fact.statement}", "layer": "fact", "ref": ref, "why": why})
            result.explain.append({"item": None, "layer": "fact", "ref": ref, "character": name,
                                   "in_section": True, "why": why})


def pov_filter_results(*, game_save, results: list[dict], pov, horizon: int) -> tuple[list[dict], list[dict]]:
    """Keep the search hits at least one of the `pov` characters knows; say why for the rest.

    A narrative chunk is known to a character present at its turn; a lore chunk to one who
    knows its entry (`KnowledgeView`). Return (kept hits, [{"id", "why"}] left out).
    """
    view = KnowledgeView(game_save, horizon=horizon)
    names = [view.index.resolve(name) for name in pov]
    kept, left_out = [], []
    for result in results:
        entry_id = result.get("entry_id") or (result.get("metadata") or {}).get("entry_id")
        verdicts = [view.entry(n, entry_id) if entry_id else view.narrative(n, int(result.get("turn_id") or 0))
                    for n in names]
        if any(v.known for v in verdicts):
            kept.append({**result, "pov": [{"character": n, "known": v.known, "why": v.why}
                                            for n, v in zip(names, verdicts)]})
        else:
            left_out.append({"id": result.get("id"), "why": "; ".join(v.why for v in verdicts)})
    return kept, left_out
