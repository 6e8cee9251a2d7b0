"""LLM generation of mental models for living memory mode (engine API `axiom.reflect`).

Turns the beliefs held about one subject (a character, or the world) into a 2-4 sentence
profile of who that subject is now, based only on those beliefs: no invention, no
arithmetic, capturing change and relationships (the discipline the seed adapts from
Hindsight's reflect prompts; the prompt is written for this project).

Never raises: "" when there are too few beliefs, on empty input or on any failure. The
deterministic UPSERT lives in `mental_models.upsert_mental_model`.
"""
from __future__ import annotations

import logging
import re

from studio.memory.llm import parse_json_payload, strip_code_fences

logger = logging.getLogger(__name__)

__all__ = ["affected_subjects", "reflect", "reflect_detailed", "MIN_BELIEFS", "MAX_BELIEFS"]

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
Answer with the profile text only."""


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


def build_prompt(subject: str, beliefs, *, mission: str | None) -> str:
    ordered = sorted(beliefs, key=lambda o: (getattr(o, "proof_count", 0) or 0), reverse=True)[:MAX_BELIEFS]
    lines = [f"- {o.statement} ({getattr(o, 'proof_count', 0) or 0} supporting facts)" for o in ordered]
    name = subject.strip() or "the world itself (places, factions, the state of things)"
    parts = [f"SUBJECT: {name}"]
    if mission and mission.strip():
        parts.append("MEMORY MISSION: " + mission.strip())
    parts.append("BELIEFS:\n" + "\n".join(lines))
    return "\n\n".join(parts)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def clean_summary(text: str) -> str:
    """Return the profile from a model answer: fences, JSON wrappers and labels removed."""
    body = strip_code_fences(text or "").strip()
    payload = parse_json_payload(body) if body[:1] in "{[" else None
    if isinstance(payload, dict):
        for key in ("summary", "profile", "model", "text"):
            if isinstance(payload.get(key), str):
                body = payload[key].strip()
                break
    body = re.sub(r"^(summary|profile|mental model)\s*:\s*", "", body, flags=re.IGNORECASE).strip()
    body = body.strip('"').strip()
    body = " ".join(body.split())
    sentences = [s for s in _SENTENCE_END.split(body) if s.strip()]
    return " ".join(sentences[:MAX_SENTENCES]).strip()


def reflect_detailed(llm, subject: str, beliefs, *, mission: str | None = None) -> tuple[str, Exception | None]:
    """Return (summary, failure): the profile, and the exception that emptied it (or None)."""
    held = [b for b in beliefs or [] if (getattr(b, "statement", "") or "").strip()]
    if len(held) < MIN_BELIEFS:
        return "", None
    try:
        answer = llm.complete(
            system=SYSTEM_PROMPT,
            prompt=build_prompt(subject or "", held, mission=mission),
            operation="reflect",
            json_mode=False,
        )
        summary = clean_summary(answer)
        if not summary:
            raise ValueError("the model returned an empty profile")
        return summary, None
    except Exception as exc:  # noqa: BLE001 - the seed contract: never raise
        logger.info("reflection produced nothing for %r: %s", subject, exc)
        return "", exc


def reflect(llm, subject: str, beliefs, *, mission: str | None = None) -> str:
    """Write a mental-model summary for `subject` from its `beliefs`.

    Return "" when there are fewer than `MIN_BELIEFS` beliefs, on empty input, or on any
    backend failure (never raise). At most `MAX_SENTENCES` sentences are kept.
    """
    summary, _ = reflect_detailed(llm, subject, beliefs, mission=mission)
    return summary
