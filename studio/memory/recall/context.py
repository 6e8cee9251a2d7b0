"""Assemble the memory context the narrator receives for the next turn, within a token budget.

`next_turn_context` is the one path to it: the narrator's prompt, the Context viewer, the
JSON API's context, the memory proxy and the recording for Lore replay call it with a
`ContextParams` (`studio.memory.recall.query_params`), so the viewer shows exactly what the
narrator gets for the same input. Without focus terms the focus is the narrator's own: the
player character (`focus.default_focus`). `build_memory_context` is the pipeline under it:

1. the policy: every knob, built once from Universe_Meta and the request
   (`studio.memory.recall.policy.context_policy`);
2. the request's state: the horizon (`search.memory_horizon`), the characters in focus
   (`studio.memory.recall.focus`: every name resolved by the one rule of names,
   `studio.memory.knowledge.names`, so an alias or a unique part of a title is its character,
   in focus once under its title; a name two characters share is neither, and a note says
   so), `{{user}}` / `{{char}}` (`studio.memory.recall.macros`, the one
   rule), the Lore Book's activation for the next turn, the time the action names (read once,
   `recall.temporal.time_preference`, for every layer it lifts);
3. the layers: every registered provider's candidates (`studio.memory.recall.layers`: the recent
   turns, the story so far, mental models, beliefs, facts, narrative memory, activated lore,
   lore found by meaning), each with its typed `ItemPolicy`;
4. the one allocator (`studio.memory.recall.allocate`) decides every candidate: in, or cut with
   the reason; never truncated (an oversized entry is represented by a passage, a chunk below
   the best `k_narrative` may come as its focus excerpt);
5. the providers' `complete` hooks: the point of view (`studio.memory.knowledge.pov`) marks what
   no character on scene knows and writes its rules and who is on scene; its text is counted
   in the budget (the allocator decides again on what is left when it does not fit);
6. the explain record: each item says why it is there (which layer, the focus term or query
   mention that pulled it in, the activation decision, the retrieval arm ranks, the link for
   expanded lore, the budget's decision); `lore_explain` says, for every entry of the book,
   whether it is in and why.

The text is the renderer's (`studio.memory.recall.render.render_memory`, `MemoryContext.text`):
every reader of the context prints that and nothing else.

Both vector queries go through `studio.memory.recall.search.memory_search`, which clamps the
horizon to the save's current turn (`memory_horizon`, also the turn beliefs' trends and
facts are read at), so a chunk a failed rewind left behind is never returned. The context
keeps both queries as Lore replay records them (`MemoryContext.queries`); recording them
as `RecordedQuery` rows (`record_source`, `record=True`, or the narrator's accept from the
context its narration was built with) is how a lore edit can later be replayed against what
play actually asked.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from studio.memory.embeddings.tokens import count_tokens  # noqa: F401  (what the budget counts; tests read it here)
from studio.memory.knowledge.names import character_index
from studio.memory.recall import context_lore
from studio.memory.recall.allocate import allocate
from studio.memory.recall.context_items import ContextItem
from studio.memory.recall.focus import default_focus, focus_subjects
from studio.memory.recall.layers import Assembly, layer_providers
from studio.memory.recall.layout import LAYERS, LAYOUT, parts_of
from studio.memory.recall.macros import macro_names_from_meta, play_meta
from studio.memory.recall.policy import ContextPolicy, context_policy
from studio.memory.recall.query_params import DEFAULT_K_LORE, DEFAULT_K_NARRATIVE, DEFAULT_TOKEN_BUDGET, ContextParams
from studio.memory.recall.render import RenderedMemory, render_memory
from studio.memory.recall.search import memory_horizon, record_context_queries
from studio.memory.recall.temporal import time_preference

__all__ = [
    "DEFAULT_K_LORE",
    "DEFAULT_K_NARRATIVE",
    "DEFAULT_TOKEN_BUDGET",
    "LAYERS",
    "ContextItem",
    "MemoryContext",
    "build_memory_context",
    "default_focus",
    "next_turn_context",
]

STORY_LAYERS = ("recent_turns", "story_so_far")  # the providers `build_memory_context(story=False)` leaves out
MAX_POV_PASSES = 3  # the allocator decides again on what the point of view's text leaves, at most this often


@dataclass
class MemoryContext:
    save_id: str
    turn: int
    query_text: str
    focus_terms: list[str]
    subjects: list[str]  # the subject keys the living memory's layers read (lower-cased; none in classic mode)
    token_budget: int
    items: list[ContextItem] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    lore_explain: list[dict[str, Any]] = field(default_factory=list)
    shares: dict[str, int] = field(default_factory=dict)
    # The policy's shares, reserve and cap, kept flat for the API's JSON (`policy` has every knob).
    reserve_recall: int = 0
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
    # The policy it was built with (every knob), and the texts providers wrote after the budget (the point of
    # view's rules and who is on scene, by layout section) with their tokens, which the budget paid.
    policy: ContextPolicy | None = None
    section_texts: dict[str, str] = field(default_factory=dict)
    section_tokens: int = 0
    # Who is in focus, each once, as shown (a character under its Lore Book title), with the term that named it and
    # the entry it resolved to, how (`studio.memory.recall.focus.FocusSubject.as_dict`).
    focus: list[dict[str, Any]] = field(default_factory=list)

    @property
    def in_focus(self) -> list[str]:
        """The names in focus as the viewer shows them: a character once, under its Lore Book title."""
        return [subject["name"] for subject in self.focus]

    @property
    def included(self) -> list[ContextItem]:
        return [i for i in self.items if i.included]

    @property
    def cut(self) -> list[ContextItem]:
        return [i for i in self.items if not i.included]

    @property
    def used_tokens(self) -> int:
        """What the budget paid: the included items' tokens (entries that ignore the budget too), the story-time
        headings they are listed under (one per layer and story time), and the point of view's text."""
        headings = {
            (i.layer, i.why["group"]): i.why.get("group_tokens", 0) for i in self.included if i.why.get("group")
        }
        return sum(i.tokens for i in self.included) + sum(headings.values()) + self.section_tokens

    @property
    def cut_tokens(self) -> int:
        return sum(i.tokens for i in self.cut)

    def sections(self) -> list[dict]:
        """Return the items by the layout's sections and parts, in the order the model reads them (the viewer)."""
        out = []
        for section in LAYOUT:
            for part in parts_of(section):
                items = [i for i in self.items if i.section == section.name and i.layer == part.layer]
                out.append(
                    {
                        "section": section.name,
                        "layer": part.layer,
                        "title": part.title,
                        "items": items,
                        "per_action": section.per_action,
                        "tokens": sum(i.tokens for i in items if i.included),
                    }
                )
        return out

    def render(self) -> RenderedMemory:
        """Return the memory as the model reads it (`render.render_memory`, the one renderer)."""
        return render_memory(self)

    @property
    def text(self) -> str:
        """The memory as the model reads it (the renderer's text)."""
        return self.render().text

    def as_dict(self) -> dict[str, Any]:
        rendered = self.render()
        return {
            "save_id": self.save_id,
            "turn": self.turn,
            "query_text": self.query_text,
            "focus_terms": self.focus_terms,
            "subjects": self.subjects,
            "focus": self.focus,
            "token_budget": self.token_budget,
            "used_tokens": self.used_tokens,
            "cut_tokens": self.cut_tokens,
            "items": [i.as_dict() for i in self.items],
            "text": rendered.text,
            "text_tokens": rendered.tokens,
            "parts": rendered.as_dict(),
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
            "policy": self.policy.as_dict() if self.policy is not None else None,
        }


def next_turn_context(
    *,
    game_save,
    params: ContextParams,
    record_source: str | None = None,
    vector_memory=None,
    universe_meta: dict[str, str] | None = None,
    carried_turns=frozenset(),
) -> MemoryContext:
    """Return what the narrator reads for the save's next turn: the one path to it.

    The narrator's prompt, the Context viewer, `POST /api/v1/saves/<id>/context`, the memory
    proxy and the recording for Lore replay all come here, so the same `params` give the same
    items and text. Without focus terms the focus is the narrator's own (`default_focus`: the
    player character). With `record_source`, the context's two vector queries are stored as
    RecordedQuery rows with that source (a write: the caller's is a POST). `universe_meta`: the
    universe's meta rows when the caller has read them already (the narrator's budget comes from
    them). `carried_turns`: the turns the caller's own messages carry (the memory proxy's chat),
    which the recent turns leave out (`ContextPolicy.carried_turns`). Raise `InvalidParameters`
    for a point of view naming no known character.
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
        carried_turns=carried_turns,
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
    carried_turns=frozenset(),
) -> MemoryContext:
    """Return the memory context for the save's next turn, assembled within `token_budget` (the module's steps).

    `story`: include the story-so-far layers (summaries, the recent turns in full;
    `studio.memory.chapters.story`), as `next_turn_context` (the narrator, the viewer, the API)
    does; without it only what memory recalls is assembled (the recall hierarchy alone).
    `pov`: the characters whose point of view the context adds (None: those on scene, when
    the save records who knows what; empty: none), `studio.memory.knowledge.pov`.
    `universe_meta`: the universe's meta rows when the caller has read them (else read here,
    once: the policy, the macros and the lore keys' macros all come from it).
    """
    started = time.perf_counter()
    focus_terms = [t.strip() for t in focus_terms or [] if t and t.strip()]
    if universe_meta is None:
        universe_meta = game_save.universe.meta_values()
    policy = context_policy(
        universe_meta,
        token_budget=token_budget,
        k_narrative=k_narrative,
        k_lore=k_lore,
        pov=None if pov is None else tuple(pov),
        carried_turns=frozenset(carried_turns or ()),
    )
    turn = memory_horizon(game_save=game_save)
    # Who is in focus, every name resolved by the one rule of names (an alias or a part of a title folds into its
    # character); the living memory's layers read the subjects, the lore and the macros the names.
    characters = character_index(game_save.universe, save=game_save, universe_meta=universe_meta)
    focus = focus_subjects(game_save, query_text, focus_terms, index=characters, living=game_save.is_living)
    subjects = focus.subjects if game_save.is_living else []
    subject_keys = [subject.key for subject in subjects]
    context = MemoryContext(
        save_id=game_save.save_id,
        turn=turn,
        query_text=query_text,
        focus_terms=focus_terms,
        subjects=subject_keys,
        token_budget=token_budget,
        policy=policy,
        shares=dict(policy.shares),
        reserve_recall=policy.reserve_recall,
        cap_recall=policy.cap_recall,
        focus=[subject.as_dict() for subject in focus.subjects],
    )
    meta = play_meta(universe=game_save.universe, save=game_save, universe_meta=universe_meta)
    t0 = time.perf_counter()
    # Lore keys are matched with nobody in focus (`lore_macros_for`'s rule).
    view = context_lore.evaluate_lore(game_save, query_text, macros=macro_names_from_meta(meta).as_dict())
    context.timings["activation_ms"] = round((time.perf_counter() - t0) * 1000, 2)
    given = {term.casefold() for term in focus_terms}
    focus_names = focus_terms + [name for name in focus.names if name.casefold() not in given]
    # {{user}} is the player character, {{char}} the card's character (else the first character in focus who is
    # not the player): studio.memory.recall.macros, the one rule.
    context.macros = macro_names_from_meta(meta, focus=focus.names).as_dict()
    # The time the action names, read from the save's story time once for every layer it lifts (beliefs, facts,
    # the narrative search's temporal arm); None when it names none.
    t0 = time.perf_counter()
    prefer = time_preference(game_save=game_save, query_text=query_text, horizon=turn) if query_text.strip() else None
    context.timings["named_time_ms"] = round((time.perf_counter() - t0) * 1000, 2)
    context.notes += focus.notes  # a name two characters answer to: neither was chosen
    if not game_save.is_living:
        context.notes.append("Classic memory mode: only narrative chunks and lore are recalled.")
    elif not subject_keys:
        context.notes.append(
            "No character in focus: name one in the query or give focus terms to bring in mental "
            "models, beliefs and facts."
        )
    if not query_text.strip():
        context.notes.append("No query text: narrative memory and lore found by meaning need one.")
    assembly = Assembly(
        game_save=game_save,
        policy=policy,
        context=context,
        query_text=query_text,
        focus_terms=focus_terms,
        subject_keys=subject_keys,
        subject_why={subject.key: subject.why for subject in subjects},
        focus_names=focus_names,
        macros=context.macros,
        universe_meta=universe_meta,
        lore_view=view,
        prefer=prefer,
        vector_memory=vector_memory,
        focus=focus,
        characters=characters,
    )
    providers = [p for p in layer_providers() if story or p.name not in STORY_LAYERS]
    candidates: list[ContextItem] = []
    for provider in providers:
        candidates += provider.provide(assembly)
    # The recent turns' share their window leaves (short turns) is recall's too; without the story layers (the
    # recall hierarchy alone) nothing stays put before recall for a cap to keep: recall may use the budget.
    spare = assembly.story.spare if story else token_budget
    allocation = allocate(candidates, policy=policy, query_text=query_text, cap_extra=spare)
    for _ in range(MAX_POV_PASSES):  # what providers write after the budget is paid from it too
        context.items = candidates
        context.section_texts = {}
        for provider in providers:
            if provider.complete is not None:
                provider.complete(assembly)
        context.section_tokens = sum(count_tokens(text) for text in context.section_texts.values() if text)
        if not context.section_tokens or context.used_tokens <= token_budget + _outside(candidates):
            break
        allocation = allocate(
            candidates, policy=policy, query_text=query_text, spent=context.section_tokens, cap_extra=spare
        )
    if allocation.excerpted:
        context.notes.append(
            f"{allocation.excerpted} narrative chunks ranked below the best {policy.k_narrative} are "
            "excerpted: the sentences that hold the action's words, the rest marked […]."
        )
    if allocation.excerpt_ms is not None:
        context.timings["excerpt_ms"] = allocation.excerpt_ms
    order = {
        (section.name, part.layer): index
        for index, (section, part) in enumerate((s, p) for s in LAYOUT for p in parts_of(s))
    }
    context.items = sorted(candidates, key=lambda i: order.get((i.section, i.layer), len(order)))  # stable
    context.lore_explain = context_lore.lore_explain(view, candidates, assembly.refused)
    context.timings["total_ms"] = round((time.perf_counter() - started) * 1000, 2)
    if record:
        record_context_queries(game_save=game_save, queries=context.queries, source="context")
    return context


def _outside(items: list[ContextItem]) -> int:
    """The tokens of included entries that ignore the budget (they may take `used_tokens` past it)."""
    return sum(i.tokens for i in items if i.included and i.policy.outside_budget)
