"""One set of limits for the values the studio stores from outside: each field declared once.

Every path that writes one of these fields applies the same `Limit`: the JSON API's schemas
(`api/schemas/`: `limited(...)`), the pages' forms (`form_field` / `form_check`), the
memory proxy (a chat's messages are turns), the importers (transcripts, LoCoMo) and the
save-file codec (its section checkers). So a value one path refuses every path refuses, with
the same message, and whatever the studio stored its save file imports again
(tests/saves/test_field_limits.py walks every field through every path).

A limit is a type and a range:
- `text`: a string of at most `max_chars` characters, without NUL (PostgreSQL cannot store
  it) or a lone UTF-16 surrogate (not Unicode, cannot be encoded); `blank=False` refuses an
  empty or white-space-only value;
- `name`: a one-line text (no control characters, line breaks included) that is not blank:
  character names, save names;
- `integer` / `number`: a JSON number as sent (`true` is not 1, `"1"` is not a number; an
  integer accepts no fraction; a number is finite) within `low`..`high`; `nullable` accepts
  None ("not set").

Nothing here imports Django or an app: the lowest layer (the engine) and every layer above
import it. `form_field` and `form_check` import Django's forms when called.

Strict JSON is part of the same rule (`strict_json_hooks`): a body or file with a key twice
in one object, or NaN / Infinity, is refused wherever JSON comes in (API bodies, the proxy,
save files), so what was accepted always serialises back to the same document.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

NUL = "\x00"
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class Refused(ValueError):
    """A value outside its field's limits: `field` names the field, `message` says what is wrong."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Limit:
    """What one stored field accepts (see the module docstring for each kind)."""

    field: str
    kind: str  # text | name | integer | number
    max_chars: int = 0
    blank: bool = True
    low: float | None = None
    high: float | None = None
    nullable: bool = False
    label: str = ""

    def problem(self, value: Any) -> str:
        """Return what is wrong with `value` for this field, or "" when it may be stored."""
        if value is None:
            return "" if self.nullable else "is required."
        if self.kind in ("text", "name"):
            return self._text_problem(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"must be a {'whole ' if self.kind == 'integer' else ''}number, not {_kind(value)}."
        if self.kind == "integer" and not isinstance(value, int):
            return "must be a whole number."
        if isinstance(value, float) and not math.isfinite(value):
            return "must be a finite number."
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            return f"must be from {_number(self.low)} to {_number(self.high)}."
        return ""

    def _text_problem(self, value: Any) -> str:
        if not isinstance(value, str):
            return f"must be a string, not {_kind(value)}."
        if NUL in value:
            return "must not contain NUL characters."
        if LONE_SURROGATE.search(value):
            return "must not contain a lone UTF-16 surrogate (it is not Unicode)."
        if self.kind == "name" and CONTROL.search(value):
            return "must be one line without control characters."
        if (not self.blank or self.kind == "name") and not value.strip():
            return "must not be blank."
        if self.max_chars and len(value) > self.max_chars:
            return f"is {len(value):,} characters long; at most {self.max_chars:,} are allowed."
        return ""

    def check(self, value: Any) -> Any:
        """Return `value` if it may be stored; raise `Refused` naming the field otherwise."""
        message = self.problem(value)
        if message:
            raise Refused(self.field, message)
        return value


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _number(value: float | None) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


_LIMITS: dict[str, Limit] = {}


def declare(limit: Limit) -> Limit:
    """Register a field's limit (once per name); return it."""
    if limit.field in _LIMITS and _LIMITS[limit.field] != limit:
        raise ValueError(f"the limits of {limit.field!r} are declared twice")
    _LIMITS[limit.field] = limit
    return limit


def limit(field: str) -> Limit:
    """Return the declared limit of `field` (KeyError for an unknown field)."""
    return _LIMITS[field]


def declared() -> dict[str, Limit]:
    """Return every declared field's limit, by name."""
    return dict(_LIMITS)


def check(field: str, value: Any) -> Any:
    """Return `value` if `field` may store it; raise `Refused` otherwise."""
    return _LIMITS[field].check(value)


def problem(field: str, value: Any) -> str:
    """Return what is wrong with `value` for `field` ("" when nothing is)."""
    return _LIMITS[field].problem(value)


# -- the fields -------------------------------------------------------------------------------
# A save and its turns (the Event_Log).
SAVE_NAME = declare(Limit("save.name", "name", max_chars=200, label="name"))
TURN_INPUT = declare(Limit("turn.player_input", "text", max_chars=20_000, label="player input"))
TURN_NARRATIVE = declare(Limit("turn.narrative", "text", max_chars=200_000, label="narrative"))
# The save's play settings (the author's note and the sampler overrides; None: not overridden).
AUTHORS_NOTE = declare(Limit("play.authors_note", "text", max_chars=2000, label="author's note"))
AUTHORS_NOTE_DEPTH = declare(Limit("play.authors_note_depth", "integer", low=0, high=20, label="depth"))
SAMPLER = {
    "temperature": declare(Limit("play.temperature", "number", low=0.0, high=2.0, nullable=True, label="temperature")),
    "top_p": declare(Limit("play.top_p", "number", low=0.0, high=1.0, nullable=True, label="top-p")),
    "max_tokens": declare(Limit("play.max_tokens", "integer", low=1, high=32768, nullable=True, label="max tokens")),
    "frequency_penalty": declare(
        Limit("play.frequency_penalty", "number", low=-2.0, high=2.0, nullable=True, label="frequency penalty")
    ),
    "repeat_penalty": declare(
        Limit("play.repeat_penalty", "number", low=0.0, high=3.0, nullable=True, label="repetition penalty")
    ),
}
# Who is on scene (presence), who learnt what (reveals: the character and who told them), a point of view.
CHARACTER_NAME = declare(Limit("character.name", "name", max_chars=200, label="character name"))
# Chapters: the note a close carries, the playtester's summary.
CHAPTER_NOTE = declare(Limit("chapter.note", "text", max_chars=300, label="note"))
CHAPTER_SUMMARY = declare(Limit("chapter.summary", "text", max_chars=20_000, label="summary"))
# The player's persona (universe meta player_character / player_description).
PERSONA_NAME = declare(Limit("persona.name", "name", max_chars=120, label="persona name"))
PERSONA_DESCRIPTION = declare(Limit("persona.description", "text", max_chars=4000, label="persona description"))


# -- adapters ---------------------------------------------------------------------------------


def form_check(field: str):
    """Return a Django form validator applying `field`'s limit (a `ValidationError` with its message)."""
    from django.core.exceptions import ValidationError

    declared_limit = _LIMITS[field]

    def validate(value):
        message = declared_limit.problem(value)
        if message:
            raise ValidationError(f"The {declared_limit.label or field} {message}", code="limit")

    return validate


def form_field(field: str, **kwargs):
    """Return a Django form field for `field`: its type, its range and its limit as the one validator.

    Text fields keep their value as typed (`strip=False`): what is checked is what is stored.
    """
    from django import forms

    declared_limit = _LIMITS[field]
    validators = [form_check(field)]
    if declared_limit.kind in ("text", "name"):
        kwargs.setdefault("strip", False)
        widget = kwargs.pop("widget", None) or (forms.TextInput if declared_limit.kind == "name" else forms.Textarea)
        widget = widget() if isinstance(widget, type) else widget
        if declared_limit.max_chars:
            widget.attrs.setdefault("maxlength", declared_limit.max_chars)
        return forms.CharField(widget=widget, validators=validators, **kwargs)
    # The range is the limit's one validator (one message); the browser gets it as min / max.
    kwargs.setdefault("required", not declared_limit.nullable)
    field_class = forms.IntegerField if declared_limit.kind == "integer" else forms.FloatField
    form_field_ = field_class(validators=validators, **kwargs)
    bounds = {"min": declared_limit.low, "max": declared_limit.high}
    form_field_.widget.attrs.update({key: value for key, value in bounds.items() if value is not None})
    return form_field_


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {key[:40]!r} appears twice in one object")
        out[key] = value
    return out


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is too large for a JSON number (it reads as infinity)")
    return value


def strict_json_hooks(*, finite: bool = True) -> dict:
    """Return `json.loads` keyword arguments that refuse duplicate keys, NaN / Infinity and numbers
    that overflow to infinity (ValueError). `finite=False` leaves the last to a caller that reports
    where each one is (the save-file codec's walk)."""
    hooks = {"object_pairs_hook": _no_duplicate_keys, "parse_constant": _no_constant}
    return {**hooks, "parse_float": _finite_float} if finite else hooks
