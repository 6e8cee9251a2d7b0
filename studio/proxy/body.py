"""The body of a proxy request: strict JSON, the chat-completions fields typed, refused before anything.

`read_body(raw)` returns the request's JSON object or raises `InvalidBody` (a 400 in the
OpenAI error shape, with `param` naming the field): nothing is written and nothing is sent
upstream for a body that

- is not JSON, or is JSON the studio refuses everywhere (`limits.strict_json_hooks`: NaN,
  Infinity, a key twice in one object; an upstream server would fail on them after the
  save had been synced and a call logged);
- gives a known field the wrong type or range (`FIELDS`: `temperature: true` is not a
  number, `n: 1.5` not a whole number, `stream: "yes"` not a boolean), as OpenAI's API
  refuses them. Fields the table does not know (`top_k`, `min_p`, `repetition_penalty`,
  a front end's own) are passed on as sent: any OpenAI-compatible server may take them.

The messages themselves are checked where they are read (`history.check_messages`: roles,
contents, and the text limits of the turns they become).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from studio import limits


class InvalidBody(ValueError):
    """The body is not a chat-completions request the proxy relays (`param`: the field, or None)."""

    def __init__(self, message: str, *, code: str = "invalid_request", param: str | None = None):
        super().__init__(message)
        self.code = code
        self.param = param


@dataclass(frozen=True)
class FieldType:
    """A known body field: its JSON type(s) and, for numbers, the range OpenAI documents."""

    kinds: tuple[str, ...]  # "string", "integer", "number", "boolean", "object", "array", "null"
    low: float | None = None
    high: float | None = None


NUMBER = ("number", "null")
FIELDS = {  # `messages` is `history.check_messages`'s
    "model": FieldType(("string",)),
    "stream": FieldType(("boolean", "null")),
    "temperature": FieldType(NUMBER, 0, 2),
    "top_p": FieldType(NUMBER, 0, 1),
    "n": FieldType(("integer", "null"), 1, None),
    "max_tokens": FieldType(("integer", "null"), 1, None),
    "max_completion_tokens": FieldType(("integer", "null"), 1, None),
    "presence_penalty": FieldType(NUMBER, -2, 2),
    "frequency_penalty": FieldType(NUMBER, -2, 2),
    "seed": FieldType(("integer", "null")),
    "stop": FieldType(("string", "array", "null")),
    "logit_bias": FieldType(("object", "null")),
    "logprobs": FieldType(("boolean", "null")),
    "top_logprobs": FieldType(("integer", "null"), 0, 20),
    "stream_options": FieldType(("object", "null")),
    "user": FieldType(("string",)),
    "tools": FieldType(("array", "null")),
    "response_format": FieldType(("object", "null")),
    "axiom_memory_tokens": FieldType(("integer", "null"), 1, None),
}


def json_kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), type(value).__name__)


def _check_field(name: str, value, spec: FieldType) -> None:
    kind = json_kind(value)
    fits = kind in spec.kinds or (kind == "integer" and "number" in spec.kinds)
    if not fits:
        wanted = " or ".join(k for k in spec.kinds if k != "null")
        raise InvalidBody(
            f"`{name}` must be {'an' if wanted[0] in 'aeiou' else 'a'} {wanted}, not {kind}.",
            code="invalid_type",
            param=name,
        )
    if kind in ("integer", "number"):
        if (spec.low is not None and value < spec.low) or (spec.high is not None and value > spec.high):
            high = "" if spec.high is None else f" to {spec.high:g}"
            raise InvalidBody(
                f"`{name}` must be from {spec.low:g}{high}, not {value!r}.", code="invalid_value", param=name
            )
    if name == "stop" and kind == "array" and not all(isinstance(item, str) for item in value):
        raise InvalidBody("`stop` must be a string or a list of strings.", code="invalid_type", param="stop")
    if name == "logit_bias" and kind == "object":
        for token, bias in value.items():
            if json_kind(bias) not in ("integer", "number") or not -100 <= bias <= 100:
                raise InvalidBody(
                    "`logit_bias` maps tokens to numbers from -100 to 100.",
                    code="invalid_value",
                    param=f"logit_bias.{token}",
                )


def read_body(raw: bytes) -> dict:
    """Return the request's body as a JSON object; raise InvalidBody (see the module docstring)."""
    try:
        body = json.loads(raw or b"", **limits.strict_json_hooks())
    except RecursionError:
        raise InvalidBody(
            "The body is nested too deeply to be a chat-completions request.", code="invalid_json"
        ) from None
    except (ValueError, UnicodeDecodeError) as exc:  # not JSON, a key twice, NaN / Infinity, a number overflowing
        raise InvalidBody(
            f"The body must be a JSON object (a chat-completions request): {exc}.", code="invalid_json"
        ) from None
    if not isinstance(body, dict):
        raise InvalidBody("The body must be a JSON object (a chat-completions request).", code="invalid_json")
    for name, spec in FIELDS.items():
        if name in body:
            _check_field(name, body[name], spec)
    return body
