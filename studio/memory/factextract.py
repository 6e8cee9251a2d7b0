"""LLM fact extraction for living memory mode (engine API `axiom.factextract`).

Turns a slice of narrative prose into atomic, structured `Fact` objects through an
`LLMBackend`. The who/what/when/where/why schema and the "atomic, verifiable, no
speculation" discipline follow the seed (adapted there from Hindsight's fact extraction);
the prompt is written for this project.

- Background only: the worker calls this, never the request that appended the turn.
- Graceful: any failure (LLM down, bad JSON) yields [] - the turn simply produced no facts.
- No persistence: the worker stores the facts with `facts.insert_facts`.

`extract_facts_detailed` returns the failure alongside the (empty) result so the job can
record why nothing came out; `extract_facts` is the seed's never-raising form.
"""
from __future__ import annotations

import logging
import unicodedata

from studio.memory.facts import Fact
from studio.memory.llm import parse_items

logger = logging.getLogger(__name__)

__all__ = ["extract_facts", "extract_facts_detailed", "FACT_TYPES", "build_prompt", "parse_facts"]

FACT_TYPES = ("world", "event", "relationship", "trait")
MAX_KNOWN_ENTITIES = 60
MAX_NARRATIVE_CHARS = 12_000

SYSTEM_PROMPT = """You extract facts from the narrative of an interactive story for the story's long-term memory.

Rules:
- Atomic: one fact = one claim. Split "Kael paid the debt and left the harbour" into two facts.
- Verifiable: only what the text states or directly shows. No speculation, no guesses about motives the text does not give, no predictions.
- Self-contained: each statement names its subjects (no "he", "she", "they", "it") and reads correctly on its own, months later.
- Canonical names: when a known entity is meant, use exactly its listed name.
- Skip atmosphere, dialogue filler and anything that does not change what a reader should remember.
- Never do arithmetic or totals; keep the numbers as the text gives them.

Fields of each fact:
- statement: one sentence, the canonical form of the fact.
- fact_type: "event" (something happened), "world" (a durable truth about the world or a place), "relationship" (how two entities stand with each other), "trait" (a durable property of one character).
- who: the acting or described entities; what: what happened or holds; when: when it happened (story time); where: the place, if stated; why: the reason, only if the text states it.
- entities: the names of every character, place, faction or item the fact involves.

Answer with JSON only: {"facts": [{"statement": "...", "fact_type": "...", "who": "...", "what": "...", "when": "...", "where": "...", "why": "...", "entities": ["..."]}]}
Answer {"facts": []} when the passage holds nothing worth remembering."""


def build_prompt(
    narrative_text: str, *, known_entities: list[str] | None = None, when_hint: str | None = None, max_facts: int = 8
) -> str:
    """Return the user prompt for one extraction call."""
    parts = [f"Extract at most {max_facts} facts, the most important first."]
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
    return "\n\n".join(parts)


def fold_name(name) -> str:
    """Return `name` casefolded without diacritics ("Kaël" and "kael" fold alike)."""
    decomposed = unicodedata.normalize("NFKD", str(name).strip())
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def _dedupe(names: list[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for name in names:
        key = name.casefold()
        if key and key not in seen:
            seen.add(key)
            out.append(name)
    return out


def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v).strip() for v in value if str(v).strip())
    return str(value).strip()


def _fact_from_item(item, *, canonical: dict[str, str], when_hint: str | None) -> Fact | None:
    if not isinstance(item, dict):
        return None
    statement = _text(item.get("statement") or item.get("fact"))
    if not statement:
        return None
    fact_type = _text(item.get("fact_type") or item.get("type")).lower()
    if fact_type not in FACT_TYPES:
        fact_type = "world"
    raw_entities = item.get("entities")
    if isinstance(raw_entities, str):
        raw_entities = [e for e in raw_entities.split(",")]
    if not isinstance(raw_entities, list):
        raw_entities = []
    who = _text(item.get("who"))
    entities = [str(e).strip() for e in raw_entities if isinstance(e, (str, int, float)) and str(e).strip()]
    if not entities and who:
        entities = [w.strip() for w in who.split(",") if w.strip()]
    entities = _dedupe([canonical.get(fold_name(e), e) for e in entities])
    when = _text(item.get("when")) or (when_hint or "")
    return Fact(
        statement=statement,
        fact_type=fact_type,
        who=who,
        what=_text(item.get("what")),
        when=when,
        where=_text(item.get("where")),
        why=_text(item.get("why")),
        entities=entities,
    )


def parse_facts(
    text: str, *, known_entities: list[str] | None = None, when_hint: str | None = None, max_facts: int = 8
) -> list[Fact]:
    """Parse a model answer into facts; raise ValueError when nothing in it is usable JSON."""
    items = parse_items(text, "facts")
    if items is None:
        raise ValueError(f"no JSON in the answer: {str(text)[:120]!r}")
    if items and not any(isinstance(i, dict) and (i.get("statement") or i.get("fact")) for i in items):
        raise ValueError(f"no fact in the answer: {str(text)[:120]!r}")
    canonical = {fold_name(n): str(n).strip() for n in known_entities or [] if str(n).strip()}
    facts: list[Fact] = []
    for item in items:
        fact = _fact_from_item(item, canonical=canonical, when_hint=when_hint)
        if fact is not None:
            facts.append(fact)
        if len(facts) >= max_facts:
            break
    return facts


def extract_facts_detailed(
    llm,
    narrative_text: str,
    *,
    known_entities: list[str] | None = None,
    when_hint: str | None = None,
    max_facts: int = 8,
) -> tuple[list[Fact], Exception | None]:
    """Return (facts, failure): the facts, and the exception that emptied them (or None)."""
    if not narrative_text or not str(narrative_text).strip() or max_facts <= 0:
        return [], None
    try:
        answer = llm.complete(
            system=SYSTEM_PROMPT,
            prompt=build_prompt(
                str(narrative_text), known_entities=known_entities, when_hint=when_hint, max_facts=max_facts
            ),
            operation="extract",
            json_mode=True,
        )
        return parse_facts(answer, known_entities=known_entities, when_hint=when_hint, max_facts=max_facts), None
    except Exception as exc:  # noqa: BLE001 - the seed contract: never raise
        logger.info("fact extraction produced nothing: %s", exc)
        return [], exc


def extract_facts(
    llm,
    narrative_text: str,
    *,
    known_entities: list[str] | None = None,
    when_hint: str | None = None,
    max_facts: int = 8,
) -> list[Fact]:
    """Extract structured facts from `narrative_text` using `llm`.

    Return [] for empty input or on any backend or parse failure (never raise), so a
    living-mode background job can call it fire-and-forget. At most `max_facts` facts;
    `known_entities` are offered as canonical names (and answers are mapped back onto their
    exact spelling); `when_hint` is the story time, used when a fact states none.
    """
    facts, _ = extract_facts_detailed(
        llm, narrative_text, known_entities=known_entities, when_hint=when_hint, max_facts=max_facts
    )
    return facts
