"""What every LLM backend shares: the protocol, the response record, errors, options.

- `LLMBackend` is the protocol the living modules are written against (one method,
  `complete(...) -> str`, the seed's contract). A backend may also offer
  `chat(...) -> LLMResponse` (text plus usage, `finish_reason`, `truncated`, the
  structured-output mode used) and `stream(...) -> ChatStream`; `ask` uses `chat` when
  there is one, so the living modules learn about truncation without requiring it.
- `LLMResponse.truncated` is True when the server stopped at the token limit
  (`finish_reason: length`). The parsers keep the complete items of such an answer;
  `TrackedLLM.truncated` collects one record per truncated call of a job, which the
  caller writes into the job's result (see docs/living-memory.md).
- `OperationOptions` are the per-operation request settings (model, temperature, penalties,
  token and time limits), read from settings by `get_llm_backend`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Protocol, runtime_checkable

OPERATIONS = ("extract", "consolidate", "reflect", "narrate", "summarize", "guard")

# The sampling fields sent only when set; a server that refuses one gets it dropped.
SAMPLING_FIELDS = ("temperature", "top_p", "frequency_penalty", "presence_penalty", "repeat_penalty")


class LLMError(Exception):
    """A call to the LLM failed. `retryable` says whether running the job again may help."""

    retryable = True


class LLMUnavailable(LLMError):
    """The endpoint did not answer usefully (network error, timeout, 429 or 5xx) after retries."""


class LLMRequestRejected(LLMError):
    """The endpoint refused the request (a 4xx other than 429): wrong model, key, or payload."""

    retryable = False


class LLMCancelled(LLMError):
    """The caller stopped the request (`abort.StreamAbort`) before its answer began: never retried."""

    retryable = False


class LLMTruncated(LLMError):
    """The answer hit the token limit before one complete item: raise the operation's max tokens.

    Not retryable: the same prompt at the same limit is cut at the same place again.
    """

    retryable = False


class SpendLimitExceeded(LLMError):
    """The save used its hourly budget of calls or tokens; the job pauses until `resume_at`."""

    retryable = False

    def __init__(self, reason: str, resume_at: datetime):
        super().__init__(reason)
        self.reason = reason
        self.resume_at = resume_at

    def retry_after(self, now: datetime | None = None) -> str:
        """Whole seconds until `resume_at` (at least 1): an HTTP answer's `Retry-After`."""
        from django.utils import timezone

        seconds = (self.resume_at - (now or timezone.now())).total_seconds()
        return str(max(int(seconds + 0.999), 1))


@dataclass
class LLMResponse:
    """One answer: its text, usage, why it stopped and how it was asked.

    `finish_reason` is the server's ("stop", "length", ...), "cancelled" for a stream closed
    early, or "" when the server gave none. `mode` is the structured-output mode that was
    used ("json_schema", "json_object_schema", "json_object" or "text").
    """

    text: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: int = 0
    estimated_tokens: bool = False
    finish_reason: str = ""
    mode: str = "text"
    max_tokens: int = 0
    first_token_ms: int | None = None
    dropped_params: list[str] = field(default_factory=list)

    @property
    def truncated(self) -> bool:
        """True when the answer was cut by the token limit (`finish_reason: length`)."""
        return self.finish_reason == "length"


@dataclass(frozen=True)
class OperationOptions:
    """Request settings of one operation; None means "not sent" (the server's default).

    `max_tokens` and `timeout` of None fall back to the backend-wide limits.
    """

    temperature: float | None = None
    top_p: float | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    repeat_penalty: float | None = None
    max_tokens: int | None = None
    timeout: float | None = None
    # The structured-output modes this operation may use (a subset of capabilities.MODES,
    # tried in that documented order); None or empty: all of them.
    modes: tuple[str, ...] | None = None

    @classmethod
    def from_value(cls, value) -> "OperationOptions":
        if isinstance(value, OperationOptions):
            return value
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in dict(value or {}).items() if k in known}
        if values.get("modes"):
            values["modes"] = parse_modes(values["modes"])
        return cls(**values)

    def sampling(self) -> dict:
        """Return the sampling fields that are set, as request-body entries."""
        return {name: getattr(self, name) for name in SAMPLING_FIELDS if getattr(self, name) is not None}


@runtime_checkable
class LLMBackend(Protocol):
    """What the living-memory operations need from a language model."""

    def complete(self, *, system: str, prompt: str, operation: str = "", json_mode: bool = False) -> str:
        """Return the model's reply to `prompt` under the `system` instructions."""
        ...


def parse_modes(value) -> tuple[str, ...]:
    """Return the structured-output modes named in `value` ("json_object,text" or a list).

    Raise ValueError naming an unknown mode. The order given does not matter: modes are
    always tried in the documented order of `capabilities.MODES`.
    """
    from studio.memory.llm.capabilities import MODES  # capabilities imports nothing from here

    names = [part.strip() for part in (value.split(",") if isinstance(value, str) else value) if str(part).strip()]
    unknown = [name for name in names if name not in MODES]
    if unknown:
        raise ValueError(f"unknown structured-output mode(s) {unknown}; known: {', '.join(MODES)}")
    return tuple(mode for mode in MODES if mode in names)


def estimate_tokens(text: str) -> int:
    """Return a rough token count (4 characters a token) for servers that report no usage."""
    return max(1, len(text or "") // 4) if text else 0


def ask(
    llm, *, system: str, prompt: str, operation: str, schema: dict | None = None, json_mode: bool = True
) -> LLMResponse:
    """Ask `llm` for one answer; return it as an LLMResponse whatever the backend offers.

    A backend with `chat` (the HTTP client, `TrackedLLM`) gets the JSON schema and reports
    truncation; a plain `LLMBackend` only has `complete`, whose text is wrapped as is.
    """
    chat = getattr(llm, "chat", None)
    if callable(chat):
        return chat(system=system, prompt=prompt, operation=operation, json_mode=json_mode, schema=schema)
    text = llm.complete(system=system, prompt=prompt, operation=operation, json_mode=json_mode)
    return LLMResponse(text=str(text or ""), model="", estimated_tokens=True)
