"""Plain dicts for the API's JSON: one function per kind of object, used by every view."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from studio.memory.recall.macros import (
    PLAYER_CHARACTER_META,
    PLAYER_DESCRIPTION_META,
    PLAYER_PORTRAIT_META,
    persona_from_meta,
)

PERSONA_META_KEYS = (PLAYER_CHARACTER_META, PLAYER_DESCRIPTION_META, PLAYER_PORTRAIT_META)


class ApiJSONEncoder(DjangoJSONEncoder):
    """DjangoJSONEncoder that also writes numpy scalars and arrays (scores from the retrieval arms)."""

    def default(self, o):
        item = getattr(o, "item", None)
        if callable(item) and getattr(o, "shape", None) == ():
            return item()
        tolist = getattr(o, "tolist", None)
        if callable(tolist):
            return tolist()
        return super().default(o)


CHUNK_FIELDS = ("id", "text", "turn_id", "chunk_type", "entry_id", "score", "distance", "metadata", "explain")


def chunk_result_json(result: dict) -> dict[str, Any]:
    """Return one memory query result: the chunk id, text, tags and its explain record.

    The known fields come first and always exist (None when the store did not give one);
    anything else the retrieval adds is kept as is.
    """
    body = {name: result.get(name) for name in CHUNK_FIELDS}
    body.update({k: v for k, v in result.items() if k not in body})
    return body


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def persona_json(meta: dict[str, str]) -> dict[str, Any]:
    """The player persona play reads from this meta: `{{user}}` is `name` (an old one-value name split)."""
    persona = persona_from_meta(meta)
    return {"name": persona.name, "description": persona.description, "has_portrait": bool(persona.portrait)}


def universe_json(universe) -> dict[str, Any]:
    """`universe.meta` is read once (prefetch the persona keys for a list: `PERSONA_META_KEYS`)."""
    return {
        "slug": universe.slug,
        "name": universe.name,
        "description": universe.description,
        "persona": persona_json({row.key: row.value for row in universe.meta.all() if row.key in PERSONA_META_KEYS}),
        "created_at": _time(universe.created_at),
        "updated_at": _time(universe.updated_at),
    }


def save_json(save) -> dict[str, Any]:
    return {
        "save_id": save.save_id,
        "name": save.name,
        "universe": save.universe.slug,
        "memory_mode": save.memory_mode,
        "beliefs_enabled": save.beliefs_enabled,
        "current_turn": save.current_turn,
        "timeline_generation": save.timeline_generation,
        "forked_from": save.forked_from.save_id if save.forked_from_id else None,
        "fork_turn": save.fork_turn,
        "created_at": _time(save.created_at),
        "last_activity_at": _time(save.last_activity_at),
    }


def event_json(event, state=None) -> dict[str, Any]:
    body = {
        "turn_id": event.turn_id,
        "player_input": event.player_input,
        "narrative": event.narrative,
        "created_at": _time(event.created_at),
    }
    if state is not None:
        body["state"] = state
    return body


def fact_json(fact) -> dict[str, Any]:
    return asdict(fact)


def belief_json(observation, now_turn: int | None) -> dict[str, Any]:
    body = asdict(observation)
    body["trend"] = observation.trend(now_turn)
    return body


def mental_model_json(model) -> dict[str, Any]:
    return asdict(model)


def job_json(job) -> dict[str, Any]:
    return {
        "id": job.pk,
        "kind": job.kind,
        "status": job.status,
        "save_id": job.game_save.save_id if job.game_save_id else None,
        "turn_id": job.turn_id,
        "timeline_generation": job.timeline_generation,
        "progress": job.progress,
        "error": job.error,
        "attempts": job.attempts,
        "result": job.result,
        "created_at": _time(job.created_at),
        "started_at": _time(job.started_at),
        "finished_at": _time(job.finished_at),
        "duration_seconds": job.duration_seconds,
    }


def rewind_result_json(result) -> dict[str, Any]:
    return {
        "save_id": result.save_id,
        "from_turn": result.from_turn,
        "target_turn": result.target_turn,
        "changed": result.changed,
        "message": result.message,
        "counts": result.counts,
        "timeline_generation": result.timeline_generation,
        "vector_pending": result.vector_pending,
        "vector_error": result.vector_error,
    }


def rewind_preview_json(preview, now_turn: int) -> dict[str, Any]:
    return {
        "save_id": preview.save_id,
        "from_turn": preview.from_turn,
        "target_turn": preview.target_turn,
        "changed": preview.changed,
        "message": preview.message,
        "counts": preview.counts,
        "beliefs_deleted": [belief_json(b, now_turn) for b in preview.beliefs_deleted],
        "beliefs_changed": [
            {
                "before": belief_json(change.before, now_turn),
                "after": belief_json(change.after, preview.target_turn),
                "restored": change.restored,
            }
            for change in preview.beliefs_changed
        ],
        "mental_models_deleted": [mental_model_json(m) for m in preview.mental_models_deleted],
        "mental_models_changed": [
            {"before": mental_model_json(c.before), "after": mental_model_json(c.after)}
            for c in preview.mental_models_changed
        ],
    }


def token_json(token) -> dict[str, Any]:
    return {
        "name": token.name,
        "prefix": token.prefix,
        "created_at": _time(token.created_at),
        "last_used_at": _time(token.last_used_at),
    }
