"""LLM belief consolidation for living memory mode (engine API `axiom.consolidate`).

Turns a batch of freshly extracted facts, together with the beliefs already held, into
CREATE / UPDATE / DELETE actions on beliefs (observations). The decision rules follow the
seed (adapted there from Hindsight's consolidation prompts): prefer UPDATE over a duplicate
CREATE, one facet per belief, be conservative about DELETE, never do arithmetic, keep what
changed. The prompt shows the universe mission and only the per-character missions of
characters in the batch, and at most `max_existing` beliefs: those about the batch's
characters first, then the most recent.

Never raises: [] on empty input or any failure. The deterministic application lives in
`observations.apply_consolidation`.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from studio.memory.llm import parse_items

logger = logging.getLogger(__name__)

__all__ = ["ConsolidationAction", "consolidate", "consolidate_detailed", "batch_characters", "scope_existing"]

CREATE = "CREATE"
UPDATE = "UPDATE"
DELETE = "DELETE"
KINDS = (CREATE, UPDATE, DELETE)

SYSTEM_PROMPT = """You maintain the beliefs of an interactive story's long-term memory. A belief is one durable sentence about a subject (a character, or the world) that the story should keep in mind for a long time.

Given NEW FACTS and the EXISTING BELIEFS, decide how the beliefs change:
- UPDATE an existing belief when a new fact confirms, refines or changes it. Prefer UPDATE over creating a near-duplicate. When something changed, say so in the new statement ("Kael, once loyal to the Guild, now works against it") instead of dropping the old state.
- CREATE a belief for something durable that no existing belief covers. One facet per belief: a character's debt and their fear of the sea are two beliefs.
- DELETE only when the new facts clearly make a belief false and no UPDATE can express the change. When unsure, do not delete.
- Never do arithmetic: do not add up sums, count days or compute totals; quote numbers as the facts give them.
- Ignore one-off details that do not matter later. It is fine to answer with no actions.
- subject: the exact name of the character the belief is about, or "" for a belief about the world.
- Follow the memory missions: they say what this world and each character tend to remember.

Answer with JSON only: {"actions": [{"action": "CREATE", "subject": "...", "statement": "...", "source_fact_ids": [1]}, {"action": "UPDATE", "observation_id": 12, "subject": "...", "statement": "...", "source_fact_ids": [2]}, {"action": "DELETE", "observation_id": 7, "source_fact_ids": [3]}]}
source_fact_ids cites the NEW FACTS that justify the action, by their id."""


@dataclass
class ConsolidationAction:
    """One belief change proposed by the consolidator LLM."""

    kind: str
    statement: str = ""
    subject: str = ""
    observation_id: int | None = None
    source_fact_ids: list[int] = field(default_factory=list)


def batch_characters(new_facts) -> list[str]:
    """Names involved in a batch of facts (entities and `who`), first spelling kept."""
    seen: dict[str, str] = {}
    for fact in new_facts or []:
        names = list(getattr(fact, "entities", None) or [])
        who = getattr(fact, "who", "") or ""
        names += [w.strip() for w in who.split(",") if w.strip()]
        for name in names:
            key = str(name).strip().casefold()
            if key and key not in seen:
                seen[key] = str(name).strip()
    return list(seen.values())


def scope_existing(existing, characters: list[str], max_existing: int) -> list:
    """Return at most `max_existing` beliefs: the batch characters' first, then most recent.

    `max_existing <= 0` keeps them all. Within each group the most recently updated come
    first; the result keeps that order.
    """
    beliefs = sorted(
        list(existing or []),
        key=lambda o: (getattr(o, "updated_turn_id", 0) or 0, getattr(o, "observation_id", 0) or 0),
        reverse=True,
    )
    if max_existing <= 0:
        return beliefs
    keys = {c.casefold() for c in characters}
    about_batch = [o for o in beliefs if (getattr(o, "subject", "") or "").strip().casefold() in keys and keys]
    chosen = about_batch[:max_existing]
    chosen_ids = {id(o) for o in chosen}
    for o in beliefs:
        if len(chosen) >= max_existing:
            break
        if id(o) not in chosen_ids:
            chosen.append(o)
            chosen_ids.add(id(o))
    return chosen


def _missions_for(missions: dict[str, str] | None, characters: list[str]) -> dict[str, str]:
    if not missions:
        return {}
    keys = {c.casefold() for c in characters}
    return {
        str(name).strip(): str(text).strip()
        for name, text in missions.items()
        if str(name).strip().casefold() in keys and str(text or "").strip()
    }


def _fact_line(fact) -> str:
    details = []
    for label in ("who", "when", "where", "why"):
        value = (getattr(fact, label, "") or "").strip()
        if value:
            details.append(f"{label}: {value}")
    if getattr(fact, "entities", None):
        details.append("entities: " + ", ".join(fact.entities))
    suffix = f" ({'; '.join(details)})" if details else ""
    return f"[{fact.fact_id}] {fact.statement}{suffix}"


def _belief_line(obs) -> str:
    subject = (obs.subject or "").strip() or "(world)"
    flags = f", {obs.proof_count} supporting facts"
    if getattr(obs, "stale", False):
        flags += ", STALE: re-examine against the new facts"
    return f"[{obs.observation_id}] {subject}: {obs.statement}{flags}"


def build_prompt(new_facts, shown_existing, *, mission: str | None, missions_shown: dict[str, str]) -> str:
    parts = []
    if mission and mission.strip():
        parts.append("WORLD MEMORY MISSION: " + mission.strip())
    if missions_shown:
        parts.append(
            "CHARACTER MEMORY MISSIONS:\n" + "\n".join(f"- {name}: {text}" for name, text in missions_shown.items())
        )
    parts.append("NEW FACTS:\n" + "\n".join(_fact_line(f) for f in new_facts))
    if shown_existing:
        parts.append("EXISTING BELIEFS:\n" + "\n".join(_belief_line(o) for o in shown_existing))
    else:
        parts.append("EXISTING BELIEFS: none yet.")
    return "\n\n".join(parts)


def _int_or_none(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def parse_actions(text: str, *, fact_ids: set[int], belief_ids: set[int]) -> list[ConsolidationAction]:
    """Parse a model answer; keep valid actions; raise ValueError when nothing is JSON."""
    items = parse_items(text, "actions")
    if items is None:
        raise ValueError(f"no JSON in the answer: {str(text)[:120]!r}")
    if items and not any(isinstance(i, dict) and (i.get("action") or i.get("kind")) for i in items):
        raise ValueError(f"no action in the answer: {str(text)[:120]!r}")
    actions: list[ConsolidationAction] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = str(item.get("action") or item.get("kind") or "").strip().upper()
        if kind not in KINDS:
            continue
        statement = str(item.get("statement") or "").strip()
        subject = str(item.get("subject") or "").strip()
        raw_sources = item.get("source_fact_ids") or []
        if not isinstance(raw_sources, list):
            raw_sources = [raw_sources]
        sources = []
        for raw in raw_sources:
            value = _int_or_none(raw)
            if value is not None and value in fact_ids and value not in sources:
                sources.append(value)
        observation_id = _int_or_none(item.get("observation_id"))
        if kind == CREATE:
            if not statement:
                continue
            observation_id = None
        else:
            # Only beliefs the model was shown may be changed (no hallucinated ids).
            if observation_id is None or observation_id not in belief_ids:
                continue
            if kind == UPDATE and not statement:
                continue
        actions.append(
            ConsolidationAction(
                kind=kind, statement=statement, subject=subject, observation_id=observation_id, source_fact_ids=sources
            )
        )
    return actions


def consolidate_detailed(
    llm, new_facts, existing, *, mission: str | None = None, missions: dict[str, str] | None = None, max_existing: int = 24
) -> tuple[list[ConsolidationAction], Exception | None]:
    """Return (actions, failure): the actions, and the exception that emptied them (or None)."""
    facts = [f for f in new_facts or [] if (getattr(f, "statement", "") or "").strip()]
    if not facts:
        return [], None
    try:
        for index, fact in enumerate(facts, start=1):
            if fact.fact_id is None:
                fact.fact_id = index
        characters = batch_characters(facts)
        shown = scope_existing(existing, characters, max_existing)
        prompt = build_prompt(facts, shown, mission=mission, missions_shown=_missions_for(missions, characters))
        answer = llm.complete(system=SYSTEM_PROMPT, prompt=prompt, operation="consolidate", json_mode=True)
        return (
            parse_actions(
                answer,
                fact_ids={f.fact_id for f in facts},
                belief_ids={o.observation_id for o in shown if o.observation_id is not None},
            ),
            None,
        )
    except Exception as exc:  # noqa: BLE001 - the seed contract: never raise
        logger.info("consolidation produced nothing: %s", exc)
        return [], exc


def consolidate(
    llm, new_facts, existing, *, mission: str | None = None, missions: dict[str, str] | None = None, max_existing: int = 24
) -> list[ConsolidationAction]:
    """Ask `llm` how the beliefs should change given `new_facts`.

    `mission` is the universe-wide memory mission; of `missions` ({entity name: mission})
    only those of characters in this batch are shown; `max_existing` caps the existing
    beliefs shown (the batch's characters first, then the most recent; <= 0 disables).
    Facts without a `fact_id` are numbered 1..n in the prompt (and get that id in place),
    and answers may only cite those ids and the ids of beliefs shown. Return [] for empty
    input or on any backend or parse failure (never raise).
    """
    actions, _ = consolidate_detailed(
        llm, new_facts, existing, mission=mission, missions=missions, max_existing=max_existing
    )
    return actions
