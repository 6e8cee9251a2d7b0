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

The answer is asked for with a JSON schema (`action_schema`) and read tolerantly: a
truncated answer keeps its complete actions, ids written as "12" or "[12]" are read, a
subject "you" / "the player" is the player character (`player_character`), other
placeholder subjects are the world (""), subjects are spelled like the batch's names, and
repeated actions (the same CREATE statement, the same UPDATE or DELETE of one belief) and
CREATEs that restate a belief already shown are dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from studio.memory.llm.base import LLMTruncated
from studio.memory.llm.normalise import fold, is_placeholder, second_person_to_name, statement_key, text_value
from studio.memory.llm.operation import Operation, Request, read_items, run_operation

__all__ = [
    "ConsolidationAction",
    "consolidate",
    "consolidate_detailed",
    "batch_characters",
    "scope_existing",
    "action_schema",
    "parse_actions",
]

CREATE = "CREATE"
UPDATE = "UPDATE"
DELETE = "DELETE"
KINDS = (CREATE, UPDATE, DELETE)

SYSTEM_PROMPT = """You maintain the beliefs of an interactive story's long-term memory. A belief is one durable \
sentence about a subject (a character, or the world) that the story should keep in mind for a long time.

Given NEW FACTS and the EXISTING BELIEFS, decide how the beliefs change:
- UPDATE an existing belief when a new fact confirms, refines or changes it. Prefer UPDATE over creating a \
near-duplicate. When something changed, say so in the new statement ("Kael, once loyal to the Guild, now works \
against it") instead of dropping the old state.
- UPDATE or DELETE a belief only with a new fact that names its subject: a fact about someone else is no evidence \
about them. Durable facts about characters that no belief covers call for CREATE.
- CREATE a belief for something durable that no existing belief covers. One facet per belief: a character's debt \
and their fear of the sea are two beliefs.
- DELETE only when the new facts clearly make a belief false and no UPDATE can express the change. When unsure, do \
not delete.
- Never do arithmetic: do not add up sums, count days or compute totals; quote numbers as the facts give them.
- Ignore one-off details that do not matter later. It is fine to answer with no actions. Never repeat an action.
- subject: the exact name of the character the belief is about, or "" for a belief about the world. Never "you".
- statement: a full sentence that names its subject and reads correctly on its own.
- Follow the memory missions: they say what this world and each character tend to remember.

Answer with JSON only: {"actions": [{"action": "CREATE", "observation_id": 0, "subject": "...", "statement": "...", \
"source_fact_ids": [1]}, {"action": "UPDATE", "observation_id": 12, "subject": "...", "statement": "...", \
"source_fact_ids": [2]}, {"action": "DELETE", "observation_id": 7, "subject": "...", "statement": "", \
"source_fact_ids": [3]}]}
observation_id is the id of the EXISTING BELIEF changed (0 for CREATE); source_fact_ids cites the NEW FACTS that \
justify the action, by their id."""


def action_schema() -> dict:
    """Return the JSON schema of a consolidation answer."""
    action = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": list(KINDS)},
            "observation_id": {"type": "integer"},
            "subject": {"type": "string"},
            "statement": {"type": "string"},
            "source_fact_ids": {"type": "array", "items": {"type": "integer"}},
        },
        "required": ["action", "observation_id", "subject", "statement", "source_fact_ids"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"actions": {"type": "array", "items": action}},
        "required": ["actions"],
        "additionalProperties": False,
    }


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


def build_prompt(
    new_facts,
    shown_existing,
    *,
    mission: str | None,
    missions_shown: dict[str, str],
    player_character: str | None = None,
) -> str:
    parts = []
    pc = (player_character or "").strip()
    if pc:
        parts.append(f'PLAYER CHARACTER: {pc} (the "you" of the story; write "{pc}", never "you").')
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
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, str):
        match = re.search(r"-?\d+", value)
        return int(match.group()) if match else None
    if isinstance(value, list) and len(value) == 1:
        return _int_or_none(value[0])
    return None


def _ints(value) -> list[int]:
    if isinstance(value, str):
        return [int(n) for n in re.findall(r"\d+", value)]
    if not isinstance(value, (list, tuple)):
        value = [value]
    return [n for n in (_int_or_none(v) for v in value) if n is not None]


_YOU_SUBJECTS = {
    "you",
    "your",
    "yourself",
    "the player",
    "player",
    "the player character",
    "player character",
    "the protagonist",
    "protagonist",
}


def _subject(value, *, names: dict[str, str], player_character: str) -> str:
    candidates = value if isinstance(value, (list, tuple)) else [value]
    for candidate in candidates:
        subject = text_value(candidate).strip(" .\"'")
        if not subject:
            continue
        if fold(subject) in _YOU_SUBJECTS:
            if player_character:
                return player_character
            continue
        if is_placeholder(subject, "who"):
            continue
        return names.get(fold(subject), subject)
    return ""


def _names(fact, subject: str) -> bool:
    """Whether `fact` names `subject` (in its entities, `who` or statement; a first name counts)."""
    if fact is None:
        return False
    wanted = fold(subject)
    first = wanted.split()[0] if wanted.split() else wanted
    names = [fold(n) for n in list(getattr(fact, "entities", None) or [])]
    names += [fold(w) for w in (getattr(fact, "who", "") or "").split(",")]
    if any(n and (n == wanted or n == first or wanted in n) for n in names):
        return True
    text = fold(getattr(fact, "statement", "") or "")
    return wanted in text or (len(first) > 2 and re.search(rf"\b{re.escape(first)}\b", text) is not None)


def _is_action_item(item: dict) -> bool:
    return any(key in item for key in ("action", "kind", "type"))


def parse_actions(
    text: str,
    *,
    fact_ids: set[int],
    belief_ids: set[int],
    player_character: str | None = None,
    names: list[str] | None = None,
    existing=None,
    facts=None,
) -> list[ConsolidationAction]:
    """Parse a model answer; keep valid actions; raise ValueError when nothing is JSON.

    `names` (the batch's characters and the shown beliefs' subjects) give subjects their
    canonical spelling; `existing` (the beliefs shown) lets a CREATE that restates one of
    them be dropped. With `facts` (the new facts, by `fact_id`), an UPDATE or DELETE of a
    belief about a character must cite at least one fact that names that character: a fact
    about someone else is no evidence about them.
    """
    by_id = {getattr(f, "fact_id", None): f for f in facts or []}
    subjects = {getattr(o, "observation_id", None): (getattr(o, "subject", "") or "").strip() for o in existing or []}
    scan = read_items(text, "actions", is_item=_is_action_item, noun="action")
    items = scan.items
    pc = (player_character or "").strip()
    canonical = {fold(n): str(n).strip() for n in names or [] if str(n).strip()}
    if pc:
        canonical.setdefault(fold(pc), pc)
    held = {
        (fold(getattr(o, "subject", "") or ""), statement_key(getattr(o, "statement", "") or ""))
        for o in existing or []
    }
    seen: set[tuple] = set()
    actions: list[ConsolidationAction] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = text_value(item.get("action") or item.get("kind") or item.get("type")).strip().upper()
        if kind not in KINDS:
            continue
        statement = text_value(item.get("statement"), joiner=" ").strip()
        if pc:
            statement = second_person_to_name(statement, pc)
        subject = _subject(item.get("subject"), names=canonical, player_character=pc)
        sources = []
        for value in _ints(item.get("source_fact_ids") or item.get("sources") or []):
            if value in fact_ids and value not in sources:
                sources.append(value)
        observation_id = _int_or_none(item.get("observation_id"))
        if kind == CREATE:
            if not statement or is_placeholder(statement):
                continue
            observation_id = None
            key = (CREATE, fold(subject), statement_key(statement))
            if (fold(subject), statement_key(statement)) in held:
                continue  # restates a belief already held
        else:
            # Only beliefs the model was shown may be changed (no hallucinated ids).
            if observation_id is None or observation_id not in belief_ids:
                continue
            if kind == UPDATE and not statement:
                continue
            about = subjects.get(observation_id, "")
            if by_id and about and sources and not any(_names(by_id.get(i), about) for i in sources):
                continue  # cites only facts about others
            key = (kind, observation_id)
        if key in seen:
            continue
        seen.add(key)
        actions.append(
            ConsolidationAction(
                kind=kind, statement=statement, subject=subject, observation_id=observation_id, source_fact_ids=sources
            )
        )
    if not actions and scan.truncated:
        raise LLMTruncated("consolidate: the answer was cut before its first complete action")
    return actions


CONSOLIDATE = Operation(name="consolidate", system=SYSTEM_PROMPT, item="action", activity="consolidation")


def consolidate_detailed(
    llm,
    new_facts,
    existing,
    *,
    mission: str | None = None,
    missions: dict[str, str] | None = None,
    max_existing: int = 24,
    player_character: str | None = None,
) -> tuple[list[ConsolidationAction], Exception | None]:
    """Return (actions, failure): the actions, and the exception that emptied them (or None)."""
    facts = [f for f in new_facts or [] if (getattr(f, "statement", "") or "").strip()]
    if not facts:
        return [], None

    def request() -> Request[list[ConsolidationAction]]:
        for index, fact in enumerate(facts, start=1):
            if fact.fact_id is None:
                fact.fact_id = index
        characters = batch_characters(facts)
        shown = scope_existing(existing, characters, max_existing)
        prompt = build_prompt(
            facts,
            shown,
            mission=mission,
            missions_shown=_missions_for(missions, characters),
            player_character=player_character,
        )
        return Request(
            prompt=prompt,
            schema=action_schema(),
            parse=lambda response: parse_actions(
                response.text,
                fact_ids={f.fact_id for f in facts},
                belief_ids={o.observation_id for o in shown if o.observation_id is not None},
                player_character=player_character,
                names=characters + [getattr(o, "subject", "") or "" for o in shown],
                existing=shown,
                facts=facts,
            ),
        )

    return run_operation(llm, CONSOLIDATE, request, empty=[])


def consolidate(
    llm,
    new_facts,
    existing,
    *,
    mission: str | None = None,
    missions: dict[str, str] | None = None,
    max_existing: int = 24,
    player_character: str | None = None,
) -> list[ConsolidationAction]:
    """Ask `llm` how the beliefs should change given `new_facts`.

    `mission` is the universe-wide memory mission; of `missions` ({entity name: mission})
    only those of characters in this batch are shown; `max_existing` caps the existing
    beliefs shown (the batch's characters first, then the most recent; <= 0 disables).
    Facts without a `fact_id` are numbered 1..n in the prompt (and get that id in place),
    and answers may only cite those ids and the ids of beliefs shown. `player_character`
    is who "you" is. Return [] for empty input or on any backend or parse failure (never
    raise).
    """
    actions, _ = consolidate_detailed(
        llm,
        new_facts,
        existing,
        mission=mission,
        missions=missions,
        max_existing=max_existing,
        player_character=player_character,
    )
    return actions
