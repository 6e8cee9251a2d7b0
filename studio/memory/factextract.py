"""LLM fact extraction for living memory mode (engine API `axiom.factextract`).

Turns a slice of narrative prose into atomic, structured `Fact` objects through an
`LLMBackend`. The who/what/when/where/why schema and the "atomic, verifiable, no
speculation" discipline follow the seed (adapted there from Hindsight's fact extraction);
the prompt is written for this project, short enough for a 1.5B model: one explicit
schema, one worked example, a cap on the number of facts.

- Background only: the worker calls this, never the request that appended the turn.
- Graceful: any failure (LLM down, bad JSON) yields [] - the turn simply produced no facts.
- No persistence: the worker stores the facts with `facts.insert_facts`.
- The player character: second-person narration ("you") is about `player_character`; the
  prompt says so, and parsing maps "you" in every field onto that name.
- What real models answer is cleaned, not trusted (see `parse_facts`): repeated facts
  dropped, lists joined, placeholders ("you", "your location", "now", "the environment")
  never stored as entities, places or times, a place in `when` left empty, entities
  recovered from `who`, copies of the prompt's example dropped.
- A truncated answer (`finish_reason: length`) keeps its complete facts; with none,
  `LLMTruncated` says which limit to raise.

`extract_facts_detailed` returns the failure alongside the (empty) result so the job can
record why nothing came out; `extract_facts` is the seed's never-raising form.
"""

from __future__ import annotations

import re

from studio.memory.facts import Fact
from studio.memory.knowledge.extract import Scene, extend_schema, parse_scene
from studio.memory.llm.base import LLMTruncated
from studio.memory.llm.normalise import (
    fold,
    is_placeholder,
    is_time_only,
    looks_temporal,
    name_leading_pronoun,
    second_person_to_name,
    split_names,
    statement_key,
    text_value,
)
from studio.memory.llm.operation import Operation, Request, read_items, run_operation

__all__ = [
    "extract_facts",
    "extract_facts_detailed",
    "FACT_TYPES",
    "build_prompt",
    "parse_facts",
    "fact_schema",
]

FACT_TYPES = ("world", "event", "relationship", "trait")
MAX_KNOWN_ENTITIES = 60
MAX_NARRATIVE_CHARS = 12_000
MAX_ENTITIES_PER_FACT = 8
MAX_ENTITY_CHARS = 60

_TYPE_SYNONYMS = {
    "relation": "relationship",
    "relationships": "relationship",
    "social": "relationship",
    "character": "trait",
    "property": "trait",
    "attribute": "trait",
    "personality": "trait",
    "action": "event",
    "events": "event",
    "happening": "event",
    "plot": "event",
    "fact": "world",
    "lore": "world",
    "location": "world",
    "place": "world",
    "setting": "world",
    "state": "world",
}

# The worked example of the prompt. Its names appear in no universe shipped here, and an
# answer that copies one of its statements gets that statement dropped.
_EXAMPLE_PASSAGE = (
    "You hand old Brask the forty tallies you owe him. He counts them twice and says the debt is settled. "
    "Rain drums on the roofs of Coldwater Quay."
)
_EXAMPLE_FACTS = [
    {
        "statement": "Tamsin paid old Brask the forty tallies she owed him.",
        "fact_type": "event",
        "who": "Tamsin, Brask",
        "what": "paid a debt of forty tallies",
        "when": "",
        "where": "Coldwater Quay",
        "why": "",
        "entities": ["Tamsin", "Brask", "Coldwater Quay"],
    },
    {
        "statement": "Brask considers Tamsin's debt to him settled.",
        "fact_type": "relationship",
        "who": "Brask, Tamsin",
        "what": "the debt is settled",
        "when": "",
        "where": "Coldwater Quay",
        "why": "Tamsin paid the forty tallies",
        "entities": ["Brask", "Tamsin"],
    },
]
_EXAMPLE_KEYS = {statement_key(f["statement"]) for f in _EXAMPLE_FACTS}


def _example_json() -> str:
    import json

    return json.dumps({"facts": _EXAMPLE_FACTS}, ensure_ascii=False)


SYSTEM_PROMPT = f"""You extract facts from the narrative of an interactive story for the story's long-term memory.

A fact is one short sentence that names who it is about and still makes sense on its own, months later.
Rules:
1. Atomic: one claim per fact. Never write the same fact twice.
2. Only what the passage states. No speculation, no guesses about motives, no predictions.
3. Self-contained: name the people and places. Never start a fact with "he", "she", "they", "it" or "you".
4. Use the known names exactly as they are listed.
5. Say what happened or what is true; do not copy sentences or dialogue from the passage.
6. Skip weather, mood and small talk. Keep numbers as the passage gives them; never add them up.

Fields of a fact:
- statement: the fact, one sentence.
- fact_type: "event" (something happened), "world" (a lasting truth about the world or a place), "relationship" \
(how two characters stand with each other), "trait" (a lasting property of one character).
- who: the names of the characters involved. what: what happened or holds. when: the story time, or "". where: the \
place name, or "". why: the reason the passage gives, or "".
- entities: the names of the characters, places, groups and named items in the fact.
Write "" when the passage does not give a field. Never write placeholders such as "unknown", "now", "here" or "your \
location".

Example. The player character is Tamsin ("you"). Passage: "{_EXAMPLE_PASSAGE}"
Answer: {_example_json()}

Answer with JSON only. When nothing is worth remembering, answer {{"facts": []}}."""


def fact_schema(max_facts: int = 8) -> dict:
    """Return the JSON schema of an extraction answer (at most `max_facts` facts)."""
    string = {"type": "string"}
    fact = {
        "type": "object",
        "properties": {
            "statement": string,
            "fact_type": {"type": "string", "enum": list(FACT_TYPES)},
            "who": string,
            "what": string,
            "when": string,
            "where": string,
            "why": string,
            "entities": {"type": "array", "items": string, "maxItems": MAX_ENTITIES_PER_FACT},
        },
        "required": ["statement", "fact_type", "who", "what", "when", "where", "why", "entities"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"facts": {"type": "array", "items": fact, "maxItems": max(1, int(max_facts))}},
        "required": ["facts"],
        "additionalProperties": False,
    }


def build_prompt(
    narrative_text: str,
    *,
    known_entities: list[str] | None = None,
    when_hint: str | None = None,
    max_facts: int = 8,
    player_character: str | None = None,
) -> str:
    """Return the user prompt for one extraction call."""
    parts = []
    pc = (player_character or "").strip()
    if pc:
        parts.append(
            f'The player character is {pc}. "You" and "your" in the passage mean {pc}: write "{pc}", never "you".'
        )
    names = _dedupe([str(n).strip() for n in known_entities or [] if str(n).strip()])[:MAX_KNOWN_ENTITIES]
    if names:
        parts.append("Known entities (use these exact names): " + "; ".join(names))
    if when_hint:
        parts.append(
            f"Story time of this passage: {when_hint}. Use it as `when` unless the text states a more precise time."
        )
    text = narrative_text.strip()
    if len(text) > MAX_NARRATIVE_CHARS:
        text = text[:MAX_NARRATIVE_CHARS]
    parts.append("Passage:\n<<<\n" + text + "\n>>>")
    parts.append(f"Extract at most {max_facts} facts, the most important first, each one different.")
    return "\n\n".join(parts)


def _dedupe(names: list[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for name in names:
        key = fold(name)
        if key and key not in seen:
            seen.add(key)
            out.append(name)
    return out


_PLAYER_WORDS = re.compile(r"\b(the player character|the player|the protagonist)\b", re.IGNORECASE)
_YOU_NAMES = {
    "you",
    "your",
    "yours",
    "yourself",
    "the player",
    "player",
    "the player character",
    "player character",
    "the protagonist",
    "protagonist",
    "you (the player)",
}


class _Context:
    def __init__(self, known_entities, when_hint, player_character):
        self.canonical = {fold(n): str(n).strip() for n in known_entities or [] if str(n).strip()}
        self.when_hint = when_hint or ""
        self.pc = (player_character or "").strip()
        if self.pc:
            self.canonical.setdefault(fold(self.pc), self.pc)

    def name(self, raw: str) -> str:
        """Return the canonical spelling of one name, the player for "you", or "" for a placeholder."""
        value = " ".join(str(raw).split()).strip(" .,;:\"'")
        if not value:
            return ""
        if fold(value) in _YOU_NAMES:
            return self.pc
        if is_placeholder(value, "who") or len(value) > MAX_ENTITY_CHARS:
            return ""
        return self.canonical.get(fold(value), value)

    def prose(self, text: str) -> str:
        if not self.pc:
            return text
        return second_person_to_name(_PLAYER_WORDS.sub(self.pc, text), self.pc)


def _names(value, ctx: _Context) -> list[str]:
    if isinstance(value, (list, tuple)):
        raw = []
        for item in value:
            raw.extend(split_names(text_value(item)) if isinstance(item, str) and "," in item else [text_value(item)])
    else:
        raw = split_names(text_value(value))
    return _dedupe([n for n in (ctx.name(r) for r in raw) if n])


def _fact_type(value) -> str:
    kind = text_value(value).strip().lower().replace("-", "_")
    kind = _TYPE_SYNONYMS.get(kind, kind)
    return kind if kind in FACT_TYPES else "world"


def _where(value, ctx: _Context) -> str:
    where = text_value(value)
    if not where or is_placeholder(where, "where") or is_time_only(where):
        return ""
    if re.match(r"^you\b", where, re.IGNORECASE):
        return ""
    if ctx.pc and re.match(r"^your\s", where, re.IGNORECASE):
        where = f"{ctx.pc}'s {where[5:].strip()}"
    elif re.match(r"^your\s", where, re.IGNORECASE):
        return ""
    return ctx.canonical.get(fold(where), where)


def _when(value, ctx: _Context, where: str) -> str:
    when = text_value(value)
    if not when or is_placeholder(when, "when"):
        return ""
    folded = fold(when)
    if folded in ctx.canonical or (where and folded == fold(where)) or not looks_temporal(when):
        return ""  # a place or a name in the time slot: left empty rather than stored wrong
    return when


def _fact_from_item(item, ctx: _Context) -> Fact | None:
    if not isinstance(item, dict):
        return None
    statement = text_value(item.get("statement") or item.get("fact") or item.get("text"), joiner=" ")
    statement = ctx.prose(statement).strip()
    if not re.search(r"[^\W\d_]", statement) or is_placeholder(statement):
        return None
    who_names = _names(item.get("who"), ctx)
    if len(who_names) == 1:
        statement = name_leading_pronoun(statement, who_names[0])
    where = _where(item.get("where"), ctx)
    when = _when(item.get("when"), ctx, where) or ctx.when_hint
    entities = _names(item.get("entities"), ctx)
    # Entities recovered from `who`, and a known place named in `where`.
    entities = _dedupe(entities + who_names + ([where] if fold(where) in ctx.canonical else []))
    what = ctx.prose(text_value(item.get("what")))
    why = ctx.prose(text_value(item.get("why")))
    return Fact(
        statement=statement,
        fact_type=_fact_type(item.get("fact_type") or item.get("type")),
        who=", ".join(who_names),
        what="" if is_placeholder(what) else what,
        when=when,
        where=where,
        why="" if is_placeholder(why) else why,
        entities=entities[:MAX_ENTITIES_PER_FACT],
    )


def _is_fact_item(item: dict) -> bool:
    return any(key in item for key in ("statement", "fact", "text"))


def parse_facts(
    text: str,
    *,
    known_entities: list[str] | None = None,
    when_hint: str | None = None,
    max_facts: int = 8,
    player_character: str | None = None,
) -> list[Fact]:
    """Parse a model answer into facts; raise ValueError when nothing in it is usable JSON.

    Repeated facts (the same normalised statement) and copies of the prompt's example are
    dropped; at most `max_facts` are kept, in the answer's order.
    """
    scan = read_items(text, "facts", is_item=_is_fact_item, noun="fact")
    items = scan.items
    ctx = _Context(known_entities, when_hint, player_character)
    facts: list[Fact] = []
    seen: set[str] = set()
    for item in items:
        fact = _fact_from_item(item, ctx)
        if fact is None:
            continue
        key = statement_key(fact.statement)
        if key in seen or key in _EXAMPLE_KEYS:
            continue
        seen.add(key)
        facts.append(fact)
        if len(facts) >= max_facts:
            break
    if not facts and scan.truncated:
        raise LLMTruncated("extract: the answer was cut before its first complete fact")
    return facts


EXTRACT = Operation(name="extract", system=SYSTEM_PROMPT, item="fact", activity="fact extraction")


def extract_facts_detailed(
    llm,
    narrative_text: str,
    *,
    known_entities: list[str] | None = None,
    when_hint: str | None = None,
    max_facts: int = 8,
    player_character: str | None = None,
    scene: Scene | None = None,
) -> tuple[list[Fact], Exception | None]:
    """Return (facts, failure): the facts, and the exception that emptied them (or None).

    With `scene`, the same call also asks who is present and who told whom, and fills it.
    """
    if not narrative_text or not str(narrative_text).strip() or max_facts <= 0:
        return [], None
    options = {
        "known_entities": known_entities,
        "when_hint": when_hint,
        "max_facts": max_facts,
        "player_character": player_character,
    }

    def parse(response):
        facts = parse_facts(response.text, **options)
        if scene is not None:  # who is present, who told whom (studio.memory.knowledge.extract)
            parse_scene(response.text, scene, [f.statement for f in facts])
        return facts

    def request() -> Request[list[Fact]]:
        prompt = build_prompt(str(narrative_text), **options)
        return Request(
            prompt=prompt + ("\n\n" + scene.prompt() if scene is not None else ""),
            schema=extend_schema(fact_schema(max_facts)) if scene is not None else fact_schema(max_facts),
            parse=parse,
        )

    return run_operation(llm, EXTRACT, request, empty=[])


def extract_facts(
    llm,
    narrative_text: str,
    *,
    known_entities: list[str] | None = None,
    when_hint: str | None = None,
    max_facts: int = 8,
    player_character: str | None = None,
) -> list[Fact]:
    """Extract structured facts from `narrative_text` using `llm`.

    Return [] for empty input or on any backend or parse failure (never raise), so a
    living-mode background job can call it fire-and-forget. At most `max_facts` facts;
    `known_entities` are offered as canonical names (and answers are mapped back onto their
    exact spelling); `when_hint` is the story time, used when a fact states none;
    `player_character` is who "you" is in second-person narration.
    """
    facts, _ = extract_facts_detailed(
        llm,
        narrative_text,
        known_entities=known_entities,
        when_hint=when_hint,
        max_facts=max_facts,
        player_character=player_character,
    )
    return facts
