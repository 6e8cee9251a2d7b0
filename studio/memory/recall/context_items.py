"""The memory context's items: one per thing the narrator may read, and how each layer makes them.

`ContextItem` is one item (its layer, text, tokens, why it is there, what it refers to, and,
once the budget has decided, whether it is in or why it was cut). The builders turn the
recall hierarchy's sources into items for `build_memory_context`
(studio/memory/recall/context.py): mental models, beliefs (live ones, strongest first, with
their trend), facts naming a subject (most recent first, dated by story time), narrative
chunks (whole, dated by story time) and lore hits (the whole entry). When the query names a
time (a `TimePreference`), the beliefs and facts of that time come first and say so; none
of the others is dropped. How the items are printed is the renderer's
(`studio.memory.recall.render`); how the budget treats each is its `ItemPolicy`
(`studio.memory.recall.layout`), given by the layer's provider.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from studio.memory.chapters.story import turn_texts
from studio.memory.chapters.story_time import story_times
from studio.memory.embeddings.tokens import count_tokens, learn_pieces
from studio.memory.models import MentalModel, Observation, subject_key_for
from studio.memory.observations import compute_trend
from studio.memory.recall import context_lore
from studio.memory.recall.fit import mark_piece
from studio.memory.recall.layout import ItemPolicy, group_heading, layer_policy
from studio.memory.recall.policy import DEFAULT_POLICY
from studio.memory.recall.search import result_key
from studio.memory.retrieval.temporal import TimePreference


@dataclass
class ContextItem:
    """One thing the narrator may read: its layer, text and tokens, why it is there, and its budget policy."""

    layer: str
    text: str
    tokens: int
    reason: str
    why: dict[str, Any] = field(default_factory=dict)  # the explain record (never the budget's policy)
    ref: dict[str, Any] = field(default_factory=dict)
    included: bool = True
    cut: str = ""
    policy: ItemPolicy | None = None  # None: its layer's (`layout.layer_policy`)

    def __post_init__(self):
        if self.policy is None:
            self.policy = layer_policy(self.layer)

    @classmethod
    def of(
        cls,
        *,
        layer: str,
        text: str,
        reason: str,
        why: dict[str, Any],
        ref: dict[str, Any],
        policy: ItemPolicy | None = None,
        **changes,
    ) -> ContextItem:
        """Return the item for `text`, its tokens counted (`count_tokens`, what the budget spends).

        `policy`: the item's budget policy (default: its layer's); `changes`: fields of it to change (`rank=`).
        """
        policy = replace(policy or layer_policy(layer), **changes) if changes else policy
        return cls(layer=layer, text=text, tokens=count_tokens(text), reason=reason, why=why, ref=ref, policy=policy)

    @property
    def section(self) -> str:
        return self.policy.section

    def as_dict(self) -> dict[str, Any]:
        """Return the item as the API and a snapshot keep it: the policy too, and in `why` the flags it once held."""
        # By hand, not `dataclasses.asdict` (which deep-copied the policy and `why` only to replace them): the same
        # keys in the same order.
        policy = self.policy
        return {
            "layer": self.layer,
            "text": self.text,
            "tokens": self.tokens,
            "reason": self.reason,
            "why": {
                **self.why,
                "budget_class": policy.budget_class,
                "protected": policy.protected,
                "ignore_budget": policy.outside_budget,
                "no_refill": not policy.refill,
            },
            "ref": copy.deepcopy(self.ref),
            "included": self.included,
            "cut": self.cut,
            "policy": policy.as_dict(),
        }


def explain_reason(result: dict) -> tuple[str, dict]:
    """Return a one-line "why" for a retrieved chunk and its structured explain record."""
    explain = dict(result.get("explain") or {})
    if explain.get("expanded_from"):
        return f"linked from lore entry {explain['expanded_from']} (one hop of link expansion)", explain
    bits = []
    if explain.get("semantic_rank") is not None:
        distance = explain.get("semantic_distance")
        bits.append(
            f"semantic #{explain['semantic_rank']}"
            + (f" (distance {distance:.3f})" if isinstance(distance, (int, float)) else "")
        )
    if explain.get("lexical_rank") is not None:
        score = explain.get("bm25_score")
        bits.append(
            f"lexical #{explain['lexical_rank']}" + (f" (BM25 {score:.2f})" if isinstance(score, (int, float)) else "")
        )
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


def subject_owners(subject_keys: list[str], aliases: Mapping[str, Sequence[str]] | None) -> dict[str, str]:
    """Return {every subject key a subject in focus answers to: that subject's key}.

    `aliases`: a subject's names (its title, keys, the parts of its title: `focus.FocusSubject.names`), so the
    memory the living memory keyed under an alias ("tamsin") is the character's ("tamsin reed")."""
    owners = {key: key for key in subject_keys}
    for key in subject_keys:
        for name in (aliases or {}).get(key, ()):
            owners.setdefault(subject_key_for(name), key)
    return owners


def mental_model_items(
    game_save,
    subject_keys: list[str],
    subject_why: dict[str, str],
    *,
    aliases: Mapping[str, Sequence[str]] | None = None,
) -> list[ContextItem]:
    """Mental models of the subjects in focus (a subject's own first, then those under its aliases), then the
    world model (the narrator's synthesis)."""
    owners = subject_owners(subject_keys, aliases)
    models = MentalModel.objects.filter(game_save=game_save, subject_key__in=[*owners, ""])
    by_owner: dict[str, list] = {}
    by_key = {*subject_keys, ""}
    for model in sorted(models, key=lambda m: (m.subject_key not in by_key, m.subject_key)):  # its own model first
        by_owner.setdefault(owners.get(model.subject_key, ""), []).append(model)
    items = []
    for key in [*subject_keys, ""]:
        for model in by_owner.get(key, ()):
            why = subject_why.get(key, "the world model (always considered)")
            stale = " — stale: rolled back by a rewind, not refreshed yet" if model.stale else ""
            text = f"{model.subject or 'The world'}: {model.summary}"
            items.append(
                ContextItem.of(
                    layer="mental_model",
                    text=text,
                    reason=f"mental model of {model.subject or 'the world'}: {why}{stale}",
                    why={
                        "subject": model.subject,
                        "focus": why,
                        "stale": model.stale,
                        "updated_turn_id": model.updated_turn_id,
                    },
                    ref={"model_id": model.pk},
                )
            )
    return items


def belief_items(
    game_save,
    subject_keys: list[str],
    subject_why: dict[str, str],
    turn: int,
    prefer: TimePreference | None = None,
    *,
    per_subject: int = DEFAULT_POLICY.max_beliefs_per_subject,
    aliases: Mapping[str, Sequence[str]] | None = None,
) -> list[ContextItem]:
    """Live beliefs about the subjects in focus, strongest first, at most `per_subject` each
    (`ContextPolicy.max_beliefs_per_subject`); a belief the living memory keyed under an alias of a subject
    (`aliases`, `subject_owners`) is that subject's.

    With `prefer` (the query names a time), a belief dated to that time (`dated_to`: at least
    half of its source turns inside it) comes first within its subject, lifted from wherever
    it ranked, and says so; every belief chosen without it is still offered after those.
    """
    if not subject_keys:
        return []
    owners = subject_owners(subject_keys, aliases)
    rows = Observation.objects.filter(game_save=game_save, subject_key__in=list(owners)).order_by(
        "-proof_count", "-updated_turn_id", "-id"
    )
    limit = per_subject * len(subject_keys) * 4
    timed = prefer is not None and bool(prefer.turns)
    every = list(rows) if timed else list(rows[:limit])  # one query: a named time looks at every belief

    def owner_of(belief) -> str:
        return owners[belief.subject_key]

    chosen = _strongest_per_subject(every[:limit], per_subject, owner_of)
    lifted = (
        _strongest_per_subject([belief for belief in every if dated_to(belief, prefer)], per_subject, owner_of)
        if timed
        else []
    )
    lifted_ids = {belief.pk for belief in lifted}
    items = []
    for belief in lifted + [belief for belief in chosen if belief.pk not in lifted_ids]:
        trend = compute_trend([s.get("turn_id") for s in belief.sources or []], turn)
        focus = subject_why[owner_of(belief)]
        why = {
            "subject": belief.subject,
            "focus": focus,
            "proof_count": belief.proof_count,
            "trend": trend,
            "stale": belief.stale,
        }
        lift = ""
        if belief.pk in lifted_ids:
            inside, total = source_turns_inside(belief, prefer)
            why["named_time"] = lift = (
                f"lifted by the named time {prefer.label}: {inside} of its {total} source turns lie inside it"
            )
        items.append(
            ContextItem.of(
                layer="belief",
                text=belief.statement,
                reason=(
                    f"belief about {belief.subject} ({focus}): "
                    f"{belief.proof_count} proof{'s' if belief.proof_count != 1 else ''}, {trend.upper()}"
                    + (", stale" if belief.stale else "")
                    + (f"; {lift}" if lift else "")
                ),
                why=why,
                ref={"observation_id": belief.pk},
            )
        )
    # Keep the subjects in focus order: the first focus character's beliefs come first (a stable sort).
    order = {key: index for index, key in enumerate(subject_keys)}
    items.sort(key=lambda i: order[owners[subject_key_for(i.why["subject"])]])
    return items


def _strongest_per_subject(beliefs, limit: int, owner_of) -> list:
    """The first `limit` beliefs of each subject (`owner_of(belief)`: the subject in focus it is about), in the
    order given."""
    per_subject: dict[str, int] = {}
    kept = []
    for belief in beliefs:
        owner = owner_of(belief)
        if per_subject.get(owner, 0) >= limit:
            continue
        per_subject[owner] = per_subject.get(owner, 0) + 1
        kept.append(belief)
    return kept


def source_turns_inside(belief, prefer: TimePreference) -> tuple[int, int]:
    """(how many of the belief's distinct source turns lie inside the named time, how many it has)."""
    turns = {
        s.get("turn_id") for s in belief.sources or [] if isinstance(s, dict) and isinstance(s.get("turn_id"), int)
    }
    return len(turns & prefer.turns), len(turns)


def dated_to(belief, prefer: TimePreference) -> bool:
    """Whether a belief belongs to the named time: at least half of its source turns lie inside it.

    A belief is durable: one backed by evidence from across the story ("Kaël owes Mira",
    reinforced every month) is not memory *from* May because one of its ten sources is; one
    whose evidence was mostly recorded then is. A belief without sources is dated to no time.
    """
    inside, total = source_turns_inside(belief, prefer)
    return total > 0 and 2 * inside >= total


def fact_items(
    game_save,
    subject_keys: list[str],
    subject_why: dict[str, str],
    turn: int,
    prefer: TimePreference | None = None,
    *,
    limit: int = DEFAULT_POLICY.max_facts,
    aliases: Mapping[str, Sequence[str]] | None = None,
    shown: Mapping[str, str] | None = None,
) -> list[ContextItem]:
    """Facts naming the subjects in focus, most recent first (`limit` each, `ContextPolicy.max_facts`), dated by
    their turn's story time. A subject's facts are those naming any of its names (`aliases`: its title, keys and
    the parts of its title, one query a subject); `shown` gives the name a reason prints (its title).

    With `prefer` (the query names a time), the facts of the turns inside it come first (the
    most recent `limit` of each subject inside it), lifted, and say so; the facts chosen
    without it all follow, in their order: the named time adds and reorders, it removes none.
    A fact is listed under its story time's heading, as narrative chunks are (the layout's
    story-ordered parts).
    """
    from studio.memory.facts import get_facts, get_facts_in_turns

    def names(key: str):
        return tuple((aliases or {}).get(key, ())) or key

    usual = _unique_facts(
        [
            (key, fact)
            for key in subject_keys
            for fact in get_facts(game_save.save_id, max_turn_id=turn, entity=names(key), limit=limit)
        ]
    )
    usual = usual[: limit * max(len(subject_keys), 1)]
    lifted = []
    if prefer is not None and prefer.turns:
        lifted = _unique_facts(
            [
                (key, fact)
                for key in subject_keys
                for fact in get_facts_in_turns(
                    game_save.save_id, prefer.turns, max_turn_id=turn, entity=names(key), limit=limit
                )
            ]
        )
    lifted_ids = {fact.fact_id for _key, fact in lifted}
    facts = lifted + [(key, fact) for key, fact in usual if fact.fact_id not in lifted_ids]
    times = story_times(game_save, {fact.turn_id for _key, fact in facts})  # a fact is dated by its turn
    items = []
    for key, fact in facts:
        when = times.get(fact.turn_id, "")
        why = {
            "entity": key,
            "focus": subject_why[key],
            "turn_id": fact.turn_id,
            "fact_type": fact.fact_type,
            "story_time": when,
            **dated_group(when),
        }
        lift = ""
        if fact.fact_id in lifted_ids:
            why["named_time"] = lift = f"lifted by the named time {prefer.label}: turn {fact.turn_id} lies inside it"
        items.append(
            ContextItem.of(
                layer="fact",
                text=f"(turn {fact.turn_id}) {fact.statement}",
                reason=(
                    f"fact naming {(shown or {}).get(key, key)} ({subject_why[key]}), from turn {fact.turn_id}"
                    + (f" ({when})" if when else "")
                    + (f"; {lift}" if lift else "")
                ),
                why=why,
                ref={"fact_id": fact.fact_id, "turn_id": fact.turn_id},
            )
        )
    return items


def _unique_facts(pairs: list) -> list:
    """(subject key, fact) pairs with each fact once, where it first appears."""
    seen: set[int] = set()
    kept = []
    for key, fact in pairs:
        if fact.fact_id not in seen:
            seen.add(fact.fact_id)
            kept.append((key, fact))
    return kept


def dated_group(story_time: str) -> dict[str, Any]:
    """The `why` keys that list an item under its story time's heading (the renderer), the heading's
    tokens paid by the group's first item taken (`allocate.assemble`); none without a story time."""
    return {"group": story_time, "group_tokens": count_tokens(group_heading(story_time)) + 1} if story_time else {}


def narrative_items(game_save, results: list[dict], macros: dict[str, str], *, shown: set[int]) -> list[ContextItem]:
    """Narrative chunks, each whole ("[…]" marks where a long turn goes on), dated by story time.

    The prompt lists them in story order under one heading per story time (the renderer):
    LoCoMo's session dates ("1:56 pm on 8 May, 2023", ~10 tokens) printed on every ~25-token
    chunk took a third of the narrative layer. A chunk is dated once: under its story time's
    heading it carries no "(turn N)" label (4 tokens a chunk, ~130 of a LoCoMo context's
    narrative layer); a chunk of a turn without story time has only that label to say when.
    The item's `ref["turn_id"]` names its turn either way (the Context viewer links it).

        A chunk of a turn the story-so-far layer shows in full is a cut item: it is in the prompt once.
    """
    turn_ids = {r.get("turn_id") for r in results}
    texts, times = turn_texts(game_save, turn_ids), story_times(game_save, turn_ids)
    bodies = [context_lore.fill(mark_piece(r.get("text", ""), texts.get(r.get("turn_id"))), macros) for r in results]
    learn_pieces(bodies)  # a new query's chunks are mostly new texts: their new words tokenized in one batch
    items, seen = [], set()
    for result, body in zip(results, bodies):
        reason, explain = explain_reason(result)
        turn_id = result.get("turn_id")
        when = times.get(turn_id, "")
        item = ContextItem.of(
            layer="narrative",
            text=body if when else f"(turn {turn_id}) {body}",
            reason=f"narrative chunk, {reason}",
            why={**explain, "story_time": when, **dated_group(when)},  # dated once per story time
            ref={"chunk_id": result.get("id"), "turn_id": turn_id, "key": result_key(result)},
        )
        if turn_id in shown or (turn_id, body) in seen:
            item.included = False
            item.cut = (
                f"already in the prompt: turn {turn_id} is shown in full under “Recent turns”"
                if turn_id in shown
                else "a copy of a chunk already taken"
            )
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
