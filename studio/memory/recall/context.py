"""Assemble the memory context the narrator receives for the next turn, within a token budget.

`next_turn_context` is the one path to it: the narrator's prompt, the Context viewer, the
JSON API's context and the recording for Lore replay call it with a `ContextParams`
(`studio.memory.recall.query_params`), so the viewer shows exactly what the narrator gets for the
same input. Without focus terms the focus is the narrator's own: the player character
(`default_focus`). `build_memory_context` is the assembly under it. The order is the seed's
recall hierarchy (`axiom.mental_models`), most synthetic first:

1. mental models of the characters in focus (then the world model),
2. their beliefs (live ones, strongest first, with the trend at the current turn),
3. facts naming them (`get_facts(entity=...)`, most recent first),
4. narrative chunks (a hybrid `VectorMemory.query` that excludes lore),
5. lore: first the entries the Lore Book activates for the next turn (constant, keys,
   recursion, sticky, ...; `studio.memory.recall.context_lore`), then lore found by meaning (a query
   restricted to lore) plus one hop of link expansion from the lore hits
   (`query_explained(expand_links=True)`: the entries a hit links to, capped).

When the query names a time (`recall.temporal.time_preference`, read once for the whole
context), the beliefs and facts of that time come first in their layers and say so, and the
narrative search gets its temporal arm; nothing any layer offers without it is dropped.

Characters in focus are the focus terms given (on-scene names), then every character the
query names: a known subject (of a belief or a mental model) or a Character entry of the
Lore Book (its title or a key). `{{user}}` / `{{char}}` in item texts are filled by the one
rule of `studio.memory.recall.macros` (the player character; the card's character, else the first
character in focus who is not the player). The budget rules are `context_lore.assemble`:
ignore-budget entries always fit, entries the pending input or a character in focus
activated go in before every other layer, the rest in hierarchy order within per-class
shares (`context_share_*` in Universe_Meta); an item that does not fit is left out whole
(kept in the result with the reason, `cut`), never truncated, and later, smaller items may
still fit. When whole narrative chunks leave a recalled one out, those ranked below the best
`k_narrative` are represented by their focus excerpts (`studio.memory.recall.excerpt`: the
sentences holding the action's words, the cuts marked "[…]") and the budget decides again. `lore_explain` says, for every entry of the book, whether it is in and why. Each
item says why it is there: which layer, the focus term or query mention that pulled it in,
the activation decision for activated lore, the retrieval arm ranks for chunks, the link
for expanded lore.

Both vector queries go through `studio.memory.recall.search.memory_search`, which clamps the
horizon to the save's current turn (`memory_horizon`, also the turn beliefs' trends and
facts are read at), so a chunk a failed rewind left behind is never returned. The context
keeps both queries as Lore replay records them (`MemoryContext.queries`); recording them
as `RecordedQuery` rows (`record_source`, `record=True`, or the narrator's accept from the
context its narration was built with) is how a lore edit can later be replayed against what
play actually asked.
"""
from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from studio.memory.chapters.story import Story, story_items
from studio.memory.embeddings.tokens import count_tokens  # noqa: F401  (what the budget counts; tests read it here)
from studio.memory.models import MentalModel, Observation, subject_key_for
from studio.memory.recall import context_lore
from studio.memory.recall.context_items import (
    ContextItem,
    belief_items,
    fact_items,
    lore_items,
    mental_model_items,
    narrative_items,
    group_heading,
    layer_lines,
)
from studio.memory.recall.excerpt import excerpt_items
from studio.memory.recall.fit import fit_to_share, item_cap
from studio.memory.recall.macros import macro_names_from_meta, play_meta
from studio.memory.recall.query_params import DEFAULT_K_LORE, DEFAULT_K_NARRATIVE, DEFAULT_TOKEN_BUDGET, ContextParams
from studio.memory.recall.search import memory_horizon, memory_search, query_record, record_context_queries
from studio.memory.recall.temporal import time_preference

__all__ = [
    "DEFAULT_K_LORE", "DEFAULT_K_NARRATIVE", "DEFAULT_TOKEN_BUDGET", "ContextItem", "MemoryContext",
    "build_memory_context", "default_focus", "group_heading", "layer_lines", "next_turn_context",
]

# The narrative search asks for share / TOKENS_PER_SMALL_CHUNK chunks (at most MAX_FILL_K), so
# the budget, not k, decides how many go in: with k = 6 the context used 222 of its 1,200
# tokens on LoCoMo (one utterance a turn, ~25 tokens each). MAX_FILL_K covers budgets up to
# 8,000 tokens (a context_budget for a large model); at 80 a 6,000-token context stopped at
# ~4,000 tokens and 0.906 of LoCoMo's evidence, at 400 it fills the budget and holds 0.97
# (docs/benchmarks.md, "What a larger budget buys"); it bounds the search's cost beyond that.
TOKENS_PER_SMALL_CHUNK = 20
MAX_FILL_K = 400

LAYERS = ("story", "chapter", "mental_model", "belief", "fact", "narrative", "lore")
LAYER_TITLES = {
    "story": "The story so far",
    "chapter": "This chapter",
    "mental_model": "Mental models",
    "belief": "Beliefs",
    "fact": "Facts",
    "narrative": "Narrative memory",
    "lore": "Lore",
}


@dataclass
class MemoryContext:
    save_id: str
    turn: int
    query_text: str
    focus_terms: list[str]
    subjects: list[str]
    token_budget: int
    items: list[ContextItem] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    lore_explain: list[dict[str, Any]] = field(default_factory=list)
    shares: dict[str, int] = field(default_factory=dict)
    # Percent of the budget kept for what the action recalls (`context_lore.reserve_from_meta`).
    reserve_recall: int = 0
    # Percent of the budget that what changes with each action may use, or None (`context_lore.recall_cap_from_meta`).
    cap_recall: int | None = None
    # Who {{user}} / {{char}} are in the item texts (`studio.memory.recall.macros.macro_names`).
    macros: dict[str, str] = field(default_factory=dict)
    # The two vector queries, as Lore replay records them (`search.query_record`).
    queries: list[dict[str, Any]] = field(default_factory=list)
    # The turns the story-so-far layer shows in full (the open chapter's window), oldest first.
    shown_turns: list[int] = field(default_factory=list)
    chapter_start: int = 1
    # Who knows what: per on-scene character, what they know (`studio.memory.knowledge.pov`).
    pov: Any = None

    @property
    def included(self) -> list[ContextItem]:
        return [i for i in self.items if i.included]

    @property
    def cut(self) -> list[ContextItem]:
        return [i for i in self.items if not i.included]

    @property
    def used_tokens(self) -> int:
        """The included items' tokens, with the story-time headings they are listed under (`layer_lines`: one per layer and story time)."""
        headings = {(i.layer, i.why["group"]): i.why.get("group_tokens", 0) for i in self.included if i.why.get("group")}
        return sum(i.tokens for i in self.included) + sum(headings.values())

    @property
    def cut_tokens(self) -> int:
        return sum(i.tokens for i in self.cut)

    def sections(self) -> list[dict]:
        """Return the items grouped by layer, in hierarchy order (for the viewer)."""
        return [
            {
                "layer": layer,
                "title": LAYER_TITLES[layer],
                "items": [i for i in self.items if i.layer == layer],
                "tokens": sum(i.tokens for i in self.items if i.layer == layer and i.included),
            }
            for layer in LAYERS
        ]

    def as_text(self) -> str:
        """Return the included items as the text block a narrator prompt would carry."""
        blocks = []
        for section in self.sections():
            lines = layer_lines([i for i in section["items"] if i.included])
            if lines:
                blocks.append(f"## {section['title']}\n" + "\n".join(lines))
        if self.pov is not None and self.pov.as_text():
            blocks.append(self.pov.as_text())
        return "\n\n".join(blocks)

    def as_dict(self) -> dict[str, Any]:
        return {
            "save_id": self.save_id,
            "turn": self.turn,
            "query_text": self.query_text,
            "focus_terms": self.focus_terms,
            "subjects": self.subjects,
            "token_budget": self.token_budget,
            "used_tokens": self.used_tokens,
            "cut_tokens": self.cut_tokens,
            "items": [asdict(i) for i in self.items],
            "text": self.as_text(),
            "timings": self.timings,
            "notes": self.notes,
            "shares": self.shares,
            "reserve_recall": self.reserve_recall,
            "cap_recall": self.cap_recall,
            "lore_explain": self.lore_explain,
            "macros": self.macros,
            "queries": self.queries,
            "shown_turns": self.shown_turns,
            "chapter_start": self.chapter_start,
            "pov": self.pov.as_dict() if self.pov is not None else None,
        }


def _word_in(term: str, text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text, flags=re.IGNORECASE) is not None


def _character_names(entry_title: str, keys) -> list[str]:
    return [n.strip() for n in [entry_title, *(k for k in keys or [] if isinstance(k, str))]
            if n.strip() and "{{" not in n and not n.startswith("/")]


def _characters_named(game_save, query_text: str) -> dict[str, str]:
    """Return {subject key: name} of the Lore Book's Character entries the query names (title or key)."""
    named: dict[str, str] = {}
    for title, keys in game_save.universe.lore_entries.filter(kind="character").values_list("title", "keys"):
        if any(_word_in(n, query_text) for n in _character_names(title, keys)):
            named.setdefault(subject_key_for(title), title)
    return named


def _characters_absent(game_save, query_text: str, focus: list[str]) -> dict[str, str]:
    """Return {entry id: title} of Character entries neither in focus (on scene) nor named in the query."""
    focus_keys = {subject_key_for(f) for f in focus if f}
    absent = {}
    for entry_id, title, keys in game_save.universe.lore_entries.filter(kind="character").values_list("entry_id", "title", "keys"):
        names = _character_names(title, keys)
        if not any(subject_key_for(n) in focus_keys or _word_in(n, query_text) for n in names):
            absent[entry_id] = title
    return absent


def _focus_subjects(game_save, query_text: str, focus_terms: list[str]) -> list[tuple[str, str, str]]:
    """Return (subject_key, why, name) for the subjects in focus: focus terms, then characters the query names.

    A character is named when the query holds, as a word, a known subject (of a belief or a
    mental model) or the title or a key of a Character entry of the Lore Book.
    """
    chosen: dict[str, tuple[str, str]] = {}
    for term in focus_terms:
        key = subject_key_for(term)
        if key:
            chosen.setdefault(key, (f"focus term “{term.strip()}”", term.strip()))
    if query_text.strip():
        model_names, belief_names = _subject_names(MentalModel, game_save), _subject_names(Observation, game_save)
        for key in sorted(model_names.keys() | belief_names.keys()):
            if key not in chosen and _word_in(key, query_text):
                # The name as the living memory writes it (keys are lower-cased): a mental model's first.
                chosen[key] = ("named in the query", model_names.get(key) or belief_names.get(key) or key)
        for key, title in _characters_named(game_save, query_text).items():
            if key and key not in chosen:
                chosen[key] = ("named in the query", title)
    return [(key, why, name) for key, (why, name) in chosen.items()]


def _subject_names(model, game_save) -> dict[str, str]:
    """Return {subject key: name} of the save's mental models or live beliefs (one query; newest row's name)."""
    names: dict[str, str] = {}
    for key, name in model.objects.filter(game_save=game_save).exclude(subject_key="").values_list("subject_key", "subject"):
        names.setdefault(key, name)  # the model's ordering: most recently updated first
    return names


def default_focus(game_save, *, universe_meta: dict[str, str] | None = None) -> list[str]:
    """Return the narrator's characters in focus when none are given: the player character.

    `universe_meta`: the universe's meta rows when the caller has read them already.
    """
    player = macro_names_from_meta(play_meta(universe=game_save.universe, save=game_save, universe_meta=universe_meta)).user
    return [player] if player else []


def next_turn_context(*, game_save, params: ContextParams, record_source: str | None = None,
                      vector_memory=None, universe_meta: dict[str, str] | None = None) -> MemoryContext:
    """Return what the narrator reads for the save's next turn: the one path to it.

    The narrator's prompt, the Context viewer, `POST /api/v1/saves/<id>/context` and the
    recording for Lore replay all come here, so the same `params` give the same items.
    Without focus terms the focus is the narrator's own (`default_focus`: the player
    character). With `record_source`, the context's two vector queries are stored as
    RecordedQuery rows with that source (a write: the caller's is a POST). `universe_meta`: the
    universe's meta rows when the caller has read them already (the narrator's budget comes from them).
    """
    if universe_meta is None:
        universe_meta = game_save.universe.meta_values()  # read once for the whole context
    context = build_memory_context(
        game_save=game_save,
        query_text=params.query_text,
        focus_terms=list(params.focus_terms) or default_focus(game_save, universe_meta=universe_meta),
        token_budget=params.token_budget,
        k_narrative=params.k_narrative,
        k_lore=params.k_lore,
        vector_memory=vector_memory,
        universe_meta=universe_meta,
        story=True,
        pov=params.pov,
    )
    if record_source:
        record_context_queries(game_save=game_save, queries=context.queries, source=record_source)
    return context


def build_memory_context(
    *,
    game_save,
    query_text: str,
    focus_terms: list[str] | None = None,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
    k_narrative: int = DEFAULT_K_NARRATIVE,
    k_lore: int = DEFAULT_K_LORE,
    record: bool = False,
    vector_memory=None,
    universe_meta: dict[str, str] | None = None,
    story: bool = False,
    pov: list[str] | tuple[str, ...] | None = None,
) -> MemoryContext:
    """Return the memory context for the save's next turn, assembled within `token_budget`.

    `story`: include the story-so-far layers (summaries, the recent turns in full;
    `studio.memory.chapters.story`), as `next_turn_context` (the narrator, the viewer, the API)
    does; without it only what memory recalls is assembled (the recall hierarchy alone).
    `pov`: the characters whose point of view the context adds (None: those on scene, when
    the save records who knows what; empty: none), `studio.memory.knowledge.pov`.

    `universe_meta`: the universe's meta rows when the caller has read them (else read here,
    once: the macros, the lore keys' macros and the budget shares all come from it).
    """
    started = time.perf_counter()
    focus_terms = [t.strip() for t in focus_terms or [] if t and t.strip()]
    turn = memory_horizon(game_save=game_save)
    subjects = _focus_subjects(game_save, query_text, focus_terms) if game_save.is_living else []
    subject_keys = [key for key, _why, _name in subjects]
    subject_why = {key: why for key, why, _name in subjects}
    context = MemoryContext(
        save_id=game_save.save_id,
        turn=turn,
        query_text=query_text,
        focus_terms=focus_terms,
        subjects=subject_keys,
        token_budget=token_budget,
    )
    candidates: list[ContextItem] = []
    if universe_meta is None:
        universe_meta = game_save.universe.meta_values()
    meta = play_meta(universe=game_save.universe, save=game_save, universe_meta=universe_meta)
    t0 = time.perf_counter()
    # Lore keys are matched with nobody in focus (`lore_macros_for`'s rule).
    view = context_lore.evaluate_lore(game_save, query_text, macros=macro_names_from_meta(meta).as_dict())
    focus_names = focus_terms + [key for key in subject_keys if key not in {t.lower() for t in focus_terms}]
    # {{user}} is the player character, {{char}} the card's character (else the first
    # character in focus who is not the player): studio.memory.recall.macros, the one rule.
    names = macro_names_from_meta(meta, focus=focus_terms + [name for _key, _why, name in subjects])
    macros = context.macros = names.as_dict()
    activated = (context_lore.activated_items(view, focus=focus_names, macros=macros, make_item=ContextItem.of) if view else [])
    context.timings["activation_ms"] = round((time.perf_counter() - t0) * 1000, 2)
    context.shares = context_lore.shares_from_meta(universe_meta)
    context.reserve_recall = context_lore.reserve_from_meta(universe_meta)
    context.cap_recall = context_lore.recall_cap_from_meta(universe_meta)
    refused: dict[str, str] = {}
    t0 = time.perf_counter()
    with_story = story
    story = story_items(game_save, horizon=turn, token_budget=token_budget, **context_lore.window_plan(universe_meta),
                        make_item=ContextItem.of, fill=lambda text: context_lore.fill(text, macros)) if with_story else Story()
    context.shown_turns, context.chapter_start = story.shown_turns, story.chapter_start
    candidates += [i for i in story.summaries if i.included] + story.turns
    context.timings["story_ms"] = round((time.perf_counter() - t0) * 1000, 2)

    # The time the action names, read from the save's story time once for every layer it lifts
    # (beliefs, facts, the narrative search's temporal arm); None when it names none.
    t0 = time.perf_counter()
    prefer = time_preference(game_save=game_save, query_text=query_text, horizon=turn) if query_text.strip() else None
    context.timings["named_time_ms"] = round((time.perf_counter() - t0) * 1000, 2)
    if game_save.is_living:
        t0 = time.perf_counter()
        candidates += mental_model_items(game_save, subject_keys, subject_why)
        if game_save.beliefs_enabled:
            candidates += belief_items(game_save, subject_keys, subject_why, turn, prefer)
        candidates += fact_items(game_save, subject_keys, subject_why, turn, prefer)
        context.timings["structured_ms"] = round((time.perf_counter() - t0) * 1000, 2)
        if not subject_keys:
            context.notes.append("No character in focus: name one in the query or give focus terms to bring in mental models, beliefs and facts.")
    else:
        context.notes.append("Classic memory mode: only narrative chunks and lore are recalled.")

    if query_text.strip():
        # Ask for enough chunks to fill the narrative share (the budget decides, not k): the
        # turns shown in full come back from the search too and are left out of it.
        fill_k = min(MAX_FILL_K, token_budget // TOKENS_PER_SMALL_CHUNK)  # the refill pass may give it the whole budget
        searches = {
            "narrative": {"k": max(k_narrative, fill_k + len(story.shown_turns)), "focus_terms": focus_terms or None, "chunk_type": None,
                          "exclude_chunk_type": "lore"},
            "lore": {"k": k_lore, "focus_terms": focus_terms or None, "chunk_type": "lore",
                     "exclude_chunk_type": None},
        }
        narrative_outcome = memory_search(game_save=game_save, query_text=query_text, prefer=prefer,
                                          vector_memory=vector_memory, **searches["narrative"])
        lore_outcome = memory_search(game_save=game_save, query_text=query_text, expand_links=True, prefer=None,
                                     vector_memory=vector_memory, **searches["lore"])  # lore has no story time
        context.queries = [
            query_record(query_text=query_text, params=searches["narrative"], results=narrative_outcome.results),
            query_record(query_text=query_text, params=searches["lore"], results=lore_outcome.results),
        ]
        context.timings["narrative_query_ms"] = round(narrative_outcome.stats.timings_ms.get("total", 0.0), 2)
        context.timings["lore_query_ms"] = round(lore_outcome.stats.timings_ms.get("total", 0.0), 2)
        named = narrative_outcome.stats.named_time  # the query named a time: memory from it is preferred
        if named:
            context.notes.append(named[:1].upper() + named[1:] + ".")
        candidates += narrative_items(game_save, narrative_outcome.results, macros, shown=set(story.shown_turns))
        candidates += activated
        activated = []
        absent = _characters_absent(game_save, query_text, focus_names) if view else {}
        for item in lore_items(lore_outcome.results, view, macros):
            allowed, why = context_lore.semantic_allowed(view, item.ref.get("entry_id"))
            if allowed and item.ref.get("entry_id") in absent:
                allowed, why = False, (f"a character's description enters when {absent[item.ref['entry_id']]} "
                                       "is on scene (in focus) or named in the action")
            if allowed:
                candidates.append(item)
            else:
                refused.setdefault(item.ref["entry_id"], why)
    else:
        context.notes.append("No query text: narrative memory and lore found by meaning need one.")
    candidates += activated

    # Protected lore first (named in the input or in focus), then the story so far (the
    # chapter's turns, the summaries), then the rest of activated lore (constant, named in the
    # chat, recursion), then what the action recalled, in rounds: the best item of every layer,
    # then the second of every layer, ... (so the top lore hit is not behind forty chunks). The
    # items keep their layer and order for display.
    decided = {id(i) for i in candidates if not i.included and i.cut}  # outside the chapter's window, shown already
    rounds: dict[int, int] = {}
    per_layer: dict[str, int] = {}
    for index, item in enumerate(candidates):
        if id(item) not in decided and context_lore.is_recall(item):
            rounds[index] = per_layer.get(item.layer, 0)
            per_layer[item.layer] = rounds[index] + 1

    def offer(i: int):
        why = candidates[i].why
        if why.get("protected"):
            return (0, 0, 0, i)
        if candidates[i].layer == "chapter":
            return (1, 0, 0, i)
        if candidates[i].layer == "story":  # the newest summaries first: the share keeps the nearest past
            return (1, 1, -candidates[i].why.get("first_turn", 0), i)
        if i in rounds:
            return (3, rounds[i], LAYERS.index(candidates[i].layer), i)
        return (2 if why.get("activation") else 4, why.get("activation_rank", 0), 0, i)

    for item in candidates:  # an entry longer than its share (or the cap) is represented by a passage, not dropped
        share_cap = token_budget * context.shares.get(context_lore.budget_class(item), 100) // 100
        if context.cap_recall is not None and context_lore.changes_per_action(item):
            share_cap = min(share_cap, token_budget * context.cap_recall // 100)
        fit_to_share(item, cap=item_cap(item, token_budget=token_budget, share_cap=share_cap))
    offered = [candidates[i] for i in sorted(range(len(candidates)), key=offer) if id(candidates[i]) not in decided]
    budget = {"token_budget": token_budget, "shares": context.shares, "reserve": context.reserve_recall,
              "cap": context.cap_recall}
    context_lore.assemble(offered, **budget)
    # Whole chunks left a recalled memory out: the best k_narrative stay whole, those below are
    # represented by their sentences that the action asks about, and the budget decides again
    # (studio.memory.recall.excerpt).
    recalled = [i for i in offered if i.layer == "narrative" and context_lore.is_recall(i)]
    if any(not i.included for i in recalled):
        t0 = time.perf_counter()
        excerpted = excerpt_items(recalled, query_text=query_text, keep_whole=k_narrative)
        if excerpted:
            context_lore.assemble(offered, **budget)
            context.notes.append(f"{excerpted} narrative chunks ranked below the best {k_narrative} are excerpted: "
                                 "the sentences that hold the action's words, the rest marked […].")
        context.timings["excerpt_ms"] = round((time.perf_counter() - t0) * 1000, 2)
    context.items.extend([i for i in story.summaries if not i.included])
    context.items.extend(candidates)
    context.lore_explain = context_lore.lore_explain(view, candidates, refused)
    # -- who knows what (studio.memory.knowledge): one hook, after the budget --
    if pov is None or list(pov):
        from studio.memory.knowledge.pov import pov_sections

        t0 = time.perf_counter()
        context.pov = pov_sections(game_save=game_save, context=context, pov=pov, query_text=query_text,
                                   focus_terms=focus_terms, universe_meta=universe_meta)
        context.timings["pov_ms"] = round((time.perf_counter() - t0) * 1000, 2)
    # -- end of the who-knows-what hook --
    context.timings["total_ms"] = round((time.perf_counter() - started) * 1000, 2)
    if record:
        record_context_queries(game_save=game_save, queries=context.queries, source="context")
    return context
