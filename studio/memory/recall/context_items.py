"""The memory context's items: one per thing the narrator may read, and how each layer makes them.

`ContextItem` is one item (its layer, text, tokens, why it is there, what it refers to, and,
once the budget has decided, whether it is in or why it was cut). The builders turn the
recall hierarchy's sources into items for `build_memory_context`
(studio/memory/recall/context.py): mental models, beliefs (live ones, strongest first, with
their trend), facts naming a subject (most recent first), narrative chunks (whole, dated by
story time) and lore hits (the whole entry). `layer_lines` is how one layer's items are
printed, for the narrator's prompt and the Context viewer's text alike.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from studio.memory.chapters.story import turn_texts
from studio.memory.chapters.story_time import story_times
from studio.memory.embeddings.tokens import count_tokens
from studio.memory.models import MentalModel, Observation, subject_key_for
from studio.memory.observations import compute_trend
from studio.memory.recall import context_lore
from studio.memory.recall.fit import mark_piece
from studio.memory.recall.search import result_key

MAX_BELIEFS_PER_SUBJECT = 6
MAX_FACTS = 12


def group_heading(story_time: str) -> str:
    """The heading the items of one story time are listed under."""
    return f"[{story_time}]"


def layer_lines(items: list) -> list[str]:
    """Return the lines of one layer's included items as the narrator reads them.

    Narrative chunks come in story order (by turn), under one heading per story time
    (`why["group"]`); other layers keep their order. A secret is marked narrator-only.
    """
    if items and all(i.layer == "narrative" for i in items):
        items = sorted(items, key=lambda i: i.ref.get("turn_id") or 0)
    lines, group = [], None
    for item in items:
        if item.why.get("group") and item.why["group"] != group:
            lines.append(group_heading(item.why["group"]))
        group = item.why.get("group")
        lines.append(f"- {'[narrator-only] ' if item.why.get('narrator_only') else ''}{item.text}")
    return lines


@dataclass
class ContextItem:
    layer: str
    text: str
    tokens: int
    reason: str
    why: dict[str, Any] = field(default_factory=dict)
    ref: dict[str, Any] = field(default_factory=dict)
    included: bool = True
    cut: str = ""

    @classmethod
    def of(cls, *, layer: str, text: str, reason: str, why: dict[str, Any], ref: dict[str, Any]) -> ContextItem:
        """Return the item for `text`, its tokens counted (`count_tokens`, what the budget spends)."""
        return cls(layer=layer, text=text, tokens=count_tokens(text), reason=reason, why=why, ref=ref)


def explain_reason(result: dict) -> tuple[str, dict]:
    """Return a one-line "why" for a retrieved chunk and its structured explain record."""
    explain = dict(result.get("explain") or {})
    if explain.get("expanded_from"):
        return f"linked from lore entry {explain['expanded_from']} (one hop of link expansion)", explain
    bits = []
    if explain.get("semantic_rank") is not None:
        distance = explain.get("semantic_distance")
        bits.append(f"semantic #{explain['semantic_rank']}" + (f" (distance {distance:.3f})" if isinstance(distance, (int, float)) else ""))
    if explain.get("lexical_rank") is not None:
        score = explain.get("bm25_score")
        bits.append(f"lexical #{explain['lexical_rank']}" + (f" (BM25 {score:.2f})" if isinstance(score, (int, float)) else ""))
    if explain.get("context_rank") is not None:
        bits.append(f"context #{explain['context_rank']}")
    if explain.get("turn_rank") is not None:
        bits.append(f"turn #{explain['turn_rank']}")
    if explain.get("temporal_rank") is not None:
        bits.append(f"named time #{explain['temporal_rank']}")
    if explain.get("focus_boost"):
        bits.append(f"focus boost +{explain['focus_boost']:g}")
    if explain.get("rerank_score") is not None:
        bits.append(f"rerank {explain['rerank_score']:.3f}")
    final_rank = explain.get("final_rank")
    head = f"rank {final_rank}" if final_rank is not None else "retrieved"
    return head + (" (" + ", ".join(bits) + ")" if bits else ""), explain


def mental_model_items(game_save, subject_keys: list[str], subject_why: dict[str, str]) -> list[ContextItem]:
    keys = subject_keys + [""]
    models = {m.subject_key: m for m in MentalModel.objects.filter(game_save=game_save, subject_key__in=keys)}
    items = []
    for key in keys:
        model = models.get(key)
        if model is None:
            continue
        why = subject_why.get(key, "the world model (always considered)")
        stale = " — stale: rolled back by a rewind, not refreshed yet" if model.stale else ""
        text = f"{model.subject or 'The world'}: {model.summary}"
        items.append(
            ContextItem.of(
                layer="mental_model",
                text=text,
                reason=f"mental model of {model.subject or 'the world'}: {why}{stale}",
                why={"subject": model.subject, "focus": why, "stale": model.stale, "updated_turn_id": model.updated_turn_id},
                ref={"model_id": model.pk},
            )
        )
    return items


def belief_items(game_save, subject_keys: list[str], subject_why: dict[str, str], turn: int) -> list[ContextItem]:
    if not subject_keys:
        return []
    rows = Observation.objects.filter(game_save=game_save, subject_key__in=subject_keys).order_by(
        "-proof_count", "-updated_turn_id", "-id"
    )
    per_subject: dict[str, int] = {}
    items = []
    for belief in rows[: MAX_BELIEFS_PER_SUBJECT * len(subject_keys) * 4]:
        if per_subject.get(belief.subject_key, 0) >= MAX_BELIEFS_PER_SUBJECT:
            continue
        per_subject[belief.subject_key] = per_subject.get(belief.subject_key, 0) + 1
        trend = compute_trend([s.get("turn_id") for s in belief.sources or []], turn)
        text = belief.statement
        items.append(
            ContextItem.of(
                layer="belief",
                text=text,
                reason=(
                    f"belief about {belief.subject} ({subject_why[belief.subject_key]}): "
                    f"{belief.proof_count} proof{'s' if belief.proof_count != 1 else ''}, {trend.upper()}"
                    + (", stale" if belief.stale else "")
                ),
                why={"subject": belief.subject, "focus": subject_why[belief.subject_key], "proof_count": belief.proof_count, "trend": trend, "stale": belief.stale},
                ref={"observation_id": belief.pk},
            )
        )
    # Keep the subjects in focus order: the first focus character's beliefs come first.
    order = {key: index for index, key in enumerate(subject_keys)}
    items.sort(key=lambda i: order[subject_key_for(i.why["subject"])])
    return items


def fact_items(game_save, subject_keys: list[str], subject_why: dict[str, str], turn: int) -> list[ContextItem]:
    from studio.memory.facts import get_facts

    items = []
    seen: set[int] = set()
    facts = [(key, fact) for key in subject_keys for fact in get_facts(game_save.save_id, max_turn_id=turn, entity=key, limit=MAX_FACTS)]
    times = story_times(game_save, {fact.turn_id for _key, fact in facts})  # a fact is dated by its turn
    for key, fact in facts:
        if fact.fact_id in seen:
            continue
        seen.add(fact.fact_id)
        when = f", {times[fact.turn_id]}" if fact.turn_id in times else ""
        text = f"(turn {fact.turn_id}{when}) {fact.statement}"
        items.append(
            ContextItem.of(
                layer="fact",
                text=text,
                reason=f"fact naming {key} ({subject_why[key]}), from turn {fact.turn_id}",
                why={"entity": key, "focus": subject_why[key], "turn_id": fact.turn_id, "fact_type": fact.fact_type},
                ref={"fact_id": fact.fact_id, "turn_id": fact.turn_id},
            )
        )
    return items[: MAX_FACTS * max(len(subject_keys), 1)]


def narrative_items(game_save, results: list[dict], macros: dict[str, str], *, shown: set[int]) -> list[ContextItem]:
    """Narrative chunks, each whole ("[…]" marks where a long turn goes on), dated by story time.

The prompt lists them in story order under one heading per story time (`layer_lines`):
LoCoMo's session dates ("1:56 pm on 8 May, 2023", ~10 tokens) printed on every ~25-token
chunk took a third of the narrative layer. A chunk is dated once: under its story time's
heading it carries no "(turn N)" label (4 tokens a chunk, ~130 of a LoCoMo context's
narrative layer); a chunk of a turn without story time has only that label to say when.
The item's `ref["turn_id"]` names its turn either way (the Context viewer links it).

    A chunk of a turn the story-so-far layer shows in full is a cut item: it is in the prompt once.
    """
    turn_ids = {r.get("turn_id") for r in results}
    texts, times = turn_texts(game_save, turn_ids), story_times(game_save, turn_ids)
    items, seen = [], set()
    for result in results:
        reason, explain = explain_reason(result)
        turn_id = result.get("turn_id")
        body = context_lore.fill(mark_piece(result.get("text", ""), texts.get(turn_id)), macros)
        when = times.get(turn_id, "")
        # Dated once per story time (`layer_lines`): the heading is paid by the group's first item.
        group = {"group": when, "group_tokens": count_tokens(group_heading(when)) + 1} if when else {}
        item = ContextItem.of(
            layer="narrative",
            text=body if when else f"(turn {turn_id}) {body}",
            reason=f"narrative chunk, {reason}",
            why={**explain, "story_time": when, **group},
            ref={"chunk_id": result.get("id"), "turn_id": turn_id, "key": result_key(result)},
        )
        if turn_id in shown or (turn_id, body) in seen:
            item.included = False
            item.cut = f"already in the prompt: turn {turn_id} is shown in full under “This chapter”" if turn_id in shown else "a copy of a chunk already taken"
        seen.add((turn_id, body))
        items.append(item)
    return items


def lore_items(results: list[dict], view=None, macros: dict[str, str] | None = None) -> list[ContextItem]:
    """Lore hits, then the entries they link to (one hop, capped, expanded by the search); whole entries."""
    items = []
    seen: set[str] = set()
    for result in results:
        entry_id = result.get("entry_id")
        if entry_id and entry_id in seen:
            continue  # a long entry stored in several pieces: one item per entry
        if entry_id:
            seen.add(entry_id)
        reason, explain = explain_reason(result)
        title = (result.get("metadata") or {}).get("title") or result.get("title")
        text = f"{title}: {result.get('text', '')}" if title else result.get("text", "")
        text = context_lore.whole_entry_text(view, entry_id, text, macros or {})
        items.append(
            ContextItem.of(
                layer="lore",
                text=text,
                reason=("lore " + reason) if explain.get("expanded_from") else f"lore hit, {reason}",
                why={**explain, "passage": context_lore.fill(result.get("text", ""), macros or {}), "title": title},
                ref={"entry_id": entry_id, "chunk_id": result.get("id"), "key": result_key(result)},
            )
        )
    return items
