"""LLM generation of mental models for living memory mode (engine API `axiom.reflect`).

Turns the beliefs held about one subject (a character, or the world) into a 2-4 sentence
profile of who that subject is now, based only on those beliefs: no invention, no
arithmetic, capturing change and relationships (the discipline the seed adapts from
Hindsight's reflect prompts; the prompt is written for this project).

Never raises: "" when there are too few beliefs, on empty input or on any failure. The
deterministic UPSERT lives in `mental_models.upsert_mental_model`.

The profile is asked for as {"summary": "..."} (`summary_schema`); a plain-prose answer,
fences, labels and a list of sentences are accepted too. An answer cut by the token limit
keeps its complete sentences. With `player_character`, a profile slipping into "you" is
rewritten about that character.
"""

from __future__ import annotations

import re

from studio.memory.llm.normalise import is_placeholder, second_person_to_name, text_value
from studio.memory.llm.operation import Operation, Request, run_operation
from studio.memory.llm.parsing import scan_json, strip_code_fences

__all__ = ["affected_subjects", "reflect", "reflect_detailed", "MIN_BELIEFS", "MAX_BELIEFS", "summary_schema"]

MIN_BELIEFS = 2  # one belief is already its own best summary
MAX_BELIEFS = 40
MAX_SENTENCES = 4

SYSTEM_PROMPT = """You write the mental model of one subject of an interactive story: a short profile of who the subject is now, which the narrator reads before writing.

Rules:
- 2 to 4 sentences of plain prose. No lists, no headings, no preamble.
- Use only the beliefs given. Invent nothing, guess nothing.
- Never do arithmetic; quote numbers as the beliefs give them.
- Capture relationships, goals, grudges and debts, and how the subject has changed (stronger-supported beliefs weigh more).
- Follow the memory mission when one is given: it says what this subject tends to remember.
- Name the subject; write about the player character in the third person, never "you".
Answer with JSON only: {"summary": "the 2 to 4 sentences"}"""


def summary_schema() -> dict:
    """Return the JSON schema of a reflection answer."""
    return {
        "type": "object",
        "properties": {"summary": {"type": "string"}},
        "required": ["summary"],
        "additionalProperties": False,
    }


def affected_subjects(actions) -> list[str]:
    """Subjects whose beliefs changed in a consolidation batch (order-preserving).

    Read the subject of each CREATE / UPDATE action (a DELETE drops a belief and names no
    subject worth re-modelling). De-duplicated case-insensitively, first spelling kept;
    world beliefs (subject "") are included (the world model).
    """
    seen: set[str] = set()
    subjects: list[str] = []
    for action in actions or []:
        kind = getattr(action, "kind", None)
        if kind is None and isinstance(action, dict):
            kind = action.get("kind") or action.get("action")
        if str(kind or "").strip().upper() not in ("CREATE", "UPDATE"):
            continue
        subject = getattr(action, "subject", None)
        if subject is None and isinstance(action, dict):
            subject = action.get("subject")
        subject = str(subject or "").strip()
        key = subject.casefold()
        if key not in seen:
            seen.add(key)
            subjects.append(subject)
    return subjects


def build_prompt(subject: str, beliefs, *, mission: str | None, player_character: str | None = None) -> str:
    ordered = sorted(beliefs, key=lambda o: getattr(o, "proof_count", 0) or 0, reverse=True)[:MAX_BELIEFS]
    lines = [f"- {o.statement} ({getattr(o, 'proof_count', 0) or 0} supporting facts)" for o in ordered]
    name = subject.strip() or "the world itself (places, factions, the state of things)"
    pc = (player_character or "").strip()
    if pc and subject.strip().casefold() == pc.casefold():
        name += ' (the player character, the "you" of the story)'
    parts = [f"SUBJECT: {name}"]
    if pc and subject.strip().casefold() != pc.casefold():
        parts.append(f'PLAYER CHARACTER: {pc} (the "you" of the story).')
    if mission and mission.strip():
        parts.append("MEMORY MISSION: " + mission.strip())
    parts.append("BELIEFS:\n" + "\n".join(lines))
    return "\n\n".join(parts)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def clean_summary(text: str, *, player_character: str | None = None, truncated: bool = False) -> str:
    """Return the profile from a model answer: fences, JSON wrappers and labels removed.

    A cut answer (JSON or prose) keeps its complete sentences only.
    """
    body = strip_code_fences(text or "").strip()
    cut = truncated
    if body[:1] in "{[":
        scan = scan_json(body)
        payload = scan.values[0] if scan.values else None
        if isinstance(payload, list) and payload and all(isinstance(p, str) for p in payload):
            body = " ".join(payload)
            cut = cut or not scan.is_complete(payload)
        elif isinstance(payload, dict):
            cut = cut or not scan.is_complete(payload)
            for key in ("summary", "profile", "mental_model", "model", "text"):
                if key in payload:
                    body = text_value(payload[key], joiner=" ")
                    break
            else:
                strings = [v for v in payload.values() if isinstance(v, str) and v.strip()]
                body = strings[0] if len(strings) == 1 else ""
    body = re.sub(r"^(summary|profile|mental model)\s*:\s*", "", body, flags=re.IGNORECASE).strip()
    body = body.strip('"').strip()
    body = " ".join(body.split())
    if player_character:
        body = second_person_to_name(body, player_character.strip())
    sentences = [s for s in _SENTENCE_END.split(body) if s.strip()]
    if cut and sentences and not re.search(r"[.!?][\"')\]]*$", sentences[-1]):
        sentences = sentences[:-1]  # the last sentence was cut off
    summary = " ".join(sentences[:MAX_SENTENCES]).strip()
    return "" if is_placeholder(summary) else summary


REFLECT = Operation(name="reflect", system=SYSTEM_PROMPT, item="sentence", activity="reflection")


def reflect_detailed(
    llm, subject: str, beliefs, *, mission: str | None = None, player_character: str | None = None
) -> tuple[str, Exception | None]:
    """Return (summary, failure): the profile, and the exception that emptied it (or None)."""
    held = [b for b in beliefs or [] if (getattr(b, "statement", "") or "").strip()]
    if len(held) < MIN_BELIEFS:
        return "", None

    def parse(response) -> str:
        summary = clean_summary(response.text, player_character=player_character, truncated=response.truncated)
        if not summary:
            raise ValueError("the model returned an empty profile")
        return summary

    def request() -> Request[str]:
        prompt = build_prompt(subject or "", held, mission=mission, player_character=player_character)
        return Request(prompt=prompt, schema=summary_schema(), parse=parse)

    return run_operation(llm, REFLECT, request, empty="", about=subject)


def reflect(llm, subject: str, beliefs, *, mission: str | None = None, player_character: str | None = None) -> str:
    """Write a mental-model summary for `subject` from its `beliefs`.

    Return "" when there are fewer than `MIN_BELIEFS` beliefs, on empty input, or on any
    backend failure (never raise). At most `MAX_SENTENCES` sentences are kept;
    `player_character` is who "you" is.
    """
    summary, _ = reflect_detailed(llm, subject, beliefs, mission=mission, player_character=player_character)
    return summary
