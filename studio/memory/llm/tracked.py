"""A backend bound to one job or request: the spend guard, the call log, truncation records.

- Before each call the save's LLM use over the last hour is compared with
  `AXIOM_LLM_CALLS_PER_HOUR` / `AXIOM_LLM_TOKENS_PER_HOUR`, and, for a call made on a user's
  request (`user_id`: the memory proxy's key holder), that user's use over the last 24 hours
  with `AXIOM_LLM_CALLS_PER_USER_DAY` / `AXIOM_LLM_TOKENS_PER_USER_DAY`; over a cap the call
  raises `SpendLimitExceeded` without reaching the endpoint, and the refusal is an `LLMCall`
  row (`refused`, no tokens: counted on the pages, never as spent).
- Every call, failed and cancelled ones too, is one `LLMCall` row (and counted on the job).
- Every answer cut by the token limit adds a record to `truncated`
  ({"operation", "max_tokens", "completion_tokens"}); the caller stores
  `tracked.truncated` in the job's result (the living jobs do this) so the Jobs table
  can say "truncated" next to the facts that were kept.
- `stream()` logs when the stream ends, fails or is closed early.
- Each row keeps the request (system and user messages, `request_text`) and the answer
  (or what arrived of it), each cut at `LOGGED_TEXT_CHARS`, so a playtester can read on the
  job and turn pages what the model was asked and said.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, F, Min, Sum
from django.utils import timezone

from studio.memory.llm.base import (
    LLMBackend,
    LLMError,
    LLMResponse,
    LLMUnavailable,
    SpendLimitExceeded,
    estimate_tokens,
)
from studio.memory.llm.relay import relay_open

LOGGED_TEXT_CHARS = 40_000  # per request and per answer: enough for a narrator prompt
SAVE_WINDOW = timedelta(hours=1)  # the per-save guard's window
USER_WINDOW = timedelta(days=1)  # the per-user guard's: a rolling day


def request_text(system: str, prompt: str, messages=None) -> str:
    """Return a call's messages as the log keeps them: `## role` then the content, in order."""
    if messages:
        parts = [f"## {m.get('role', '?')}\n{m.get('content') or ''}" for m in messages if isinstance(m, dict)]
    else:
        parts = ([f"## system\n{system}"] if system else []) + [f"## user\n{prompt}"]
    return "\n\n".join(parts)[:LOGGED_TEXT_CHARS]


@dataclass
class SpendStatus:
    calls: int
    tokens: int
    calls_cap: int
    tokens_cap: int
    oldest: datetime | None

    @property
    def exceeded(self) -> bool:
        return (self.calls_cap > 0 and self.calls >= self.calls_cap) or (
            self.tokens_cap > 0 and self.tokens >= self.tokens_cap
        )


def _status(calls, *, since: datetime, calls_cap: int, tokens_cap: int) -> SpendStatus:
    agg = calls.filter(created_at__gt=since, refused=False).aggregate(
        n=Count("id"), p=Sum("prompt_tokens"), c=Sum("completion_tokens"), oldest=Min("created_at")
    )
    return SpendStatus(
        calls=agg["n"] or 0,
        tokens=(agg["p"] or 0) + (agg["c"] or 0),
        calls_cap=calls_cap,
        tokens_cap=tokens_cap,
        oldest=agg["oldest"],
    )


def spend_status(*, game_save_id: int, now: datetime | None = None) -> SpendStatus:
    """Return a save's LLM use over the last hour against the configured caps (refusals not counted)."""
    from studio.memory.models import LLMCall

    now = now or timezone.now()
    return _status(
        LLMCall.objects.filter(game_save_id=game_save_id),
        since=now - SAVE_WINDOW,
        calls_cap=settings.AXIOM_LLM_CALLS_PER_HOUR,
        tokens_cap=settings.AXIOM_LLM_TOKENS_PER_HOUR,
    )


def user_spend_status(*, user_id: int, now: datetime | None = None) -> SpendStatus:
    """Return a user's LLM use over the last day (every save, the calls made for their requests) against
    `AXIOM_LLM_CALLS_PER_USER_DAY` / `AXIOM_LLM_TOKENS_PER_USER_DAY`."""
    from studio.memory.models import LLMCall

    now = now or timezone.now()
    return _status(
        LLMCall.objects.filter(user_id=user_id),
        since=now - USER_WINDOW,
        calls_cap=settings.AXIOM_LLM_CALLS_PER_USER_DAY,
        tokens_cap=settings.AXIOM_LLM_TOKENS_PER_USER_DAY,
    )


def _exceeded(status: SpendStatus, *, whose: str, window: timedelta, span: str) -> SpendLimitExceeded | None:
    if not status.exceeded:
        return None
    resume_at = (status.oldest or timezone.now()) + window
    if status.calls_cap > 0 and status.calls >= status.calls_cap:
        what = f"{status.calls} LLM calls in the last {span} (cap {status.calls_cap})"
    else:
        what = f"{status.tokens} LLM tokens in the last {span} (cap {status.tokens_cap})"
    return SpendLimitExceeded(
        f"spend guard: {whose} used {what}; paused until {resume_at:%Y-%m-%d %H:%M} UTC", resume_at
    )


class TrackedLLM:
    """A backend bound to one job: checks the spend guard, logs each call as an LLMCall.

    The last failure is kept in `errors` so a job can tell "the model said nothing useful"
    from "the call failed" even though the seed operations swallow exceptions.
    """

    def __init__(
        self,
        backend: LLMBackend,
        *,
        game_save_id: int | None = None,
        job_id: int | None = None,
        user_id: int | None = None,
    ):
        self.backend = backend
        self.game_save_id = game_save_id
        self.job_id = job_id
        self.user_id = user_id  # whose request this is: the per-user daily guard counts the calls
        self.calls = 0
        self.tokens = 0
        self.errors: list[tuple[str, LLMError]] = []
        self.truncated: list[dict] = []

    def check_budget(self) -> None:
        """Raise SpendLimitExceeded when the save's hourly or the user's daily use is over its cap."""
        if self.game_save_id is not None and (
            settings.AXIOM_LLM_CALLS_PER_HOUR > 0 or settings.AXIOM_LLM_TOKENS_PER_HOUR > 0
        ):
            refusal = _exceeded(
                spend_status(game_save_id=self.game_save_id), whose="this save", window=SAVE_WINDOW, span="hour"
            )
            if refusal is not None:
                raise refusal
        if self.user_id is not None and (
            settings.AXIOM_LLM_CALLS_PER_USER_DAY > 0 or settings.AXIOM_LLM_TOKENS_PER_USER_DAY > 0
        ):
            refusal = _exceeded(
                user_spend_status(user_id=self.user_id), whose="your key's user", window=USER_WINDOW, span="24 hours"
            )
            if refusal is not None:
                raise refusal

    def preflight(self, operation: str) -> None:
        """Check the spend guards now, before a request writes anything (the proxy); a refusal is logged."""
        self._guard(operation)

    def model_for(self, operation: str) -> str:
        return getattr(self.backend, "model_for", lambda op: "")(operation)

    def _guard(self, operation: str) -> None:
        try:
            self.check_budget()
        except SpendLimitExceeded as exc:
            self.errors.append((operation, exc))
            # Counted where calls are read (the Jobs page, the admin's LLM calls), never as spent.
            self._log(operation, self.model_for(operation), 0, 0, 0, exc.reason, refused=True)
            raise

    def complete(self, *, system: str, prompt: str, operation: str = "", json_mode: bool = False) -> str:
        return self.chat(system=system, prompt=prompt, operation=operation, json_mode=json_mode).text

    def chat(
        self, *, system: str = "", prompt: str = "", operation: str = "", json_mode: bool = False, **options
    ) -> LLMResponse:
        """Call the backend once (guarded and logged); return its LLMResponse."""
        self._guard(operation)
        model = self.model_for(operation)
        started = time.monotonic()
        try:
            if hasattr(self.backend, "chat"):
                response = self.backend.chat(
                    system=system, prompt=prompt, operation=operation, json_mode=json_mode, **options
                )
            else:
                text = self.backend.complete(system=system, prompt=prompt, operation=operation, json_mode=json_mode)
                response = LLMResponse(
                    text=text,
                    model=model,
                    completion_tokens=estimate_tokens(text),
                    latency_ms=int((time.monotonic() - started) * 1000),
                    estimated_tokens=True,
                )
        except Exception as exc:
            raise self._failed(
                operation, model, started, exc, request_text(system, prompt, options.get("messages"))
            ) from exc
        self._record(
            operation,
            response,
            prompt_text=system + prompt + _messages_text(options.get("messages")),
            request=request_text(system, prompt, options.get("messages")),
        )
        return response

    def stream(self, *, system: str = "", prompt: str = "", operation: str = "narrate", **options):
        """Open a stream through the backend (guarded); it is logged when it ends or is closed."""
        self._guard(operation)
        model = self.model_for(operation)
        started = time.monotonic()
        request = request_text(system, prompt, options.get("messages"))
        try:
            stream = self.backend.stream(system=system, prompt=prompt, operation=operation, **options)
        except Exception as exc:
            raise self._failed(operation, model, started, exc, request) from exc
        return self._logged_at_end(
            stream, operation, prompt_text=system + prompt + _messages_text(options.get("messages")), request=request
        )

    def relay(self, body: dict, *, stream: bool, operation: str = "proxy", abort=None, preflighted: bool = False):
        """Relay a caller's chat-completions `body` (guarded); logged when the answer ends.

        `preflighted`: this request's `preflight` already checked the same guards (the save's and
        the user's), a moment ago and with nothing spent since by it: not checked again.
        Return the open `studio.memory.llm.relay.Relay`; raise SpendLimitExceeded (nothing
        sent), LLMUnavailable, RelayRefused or (`abort` flipped before the answer began)
        LLMCancelled, the last three logged as failed calls.
        """
        if not preflighted:
            self._guard(operation)
        started = time.monotonic()
        request = request_text("", "", body.get("messages"))
        try:
            relay = relay_open(self.backend, body, stream=stream, abort=abort)
        except Exception as exc:
            raise self._failed(operation, str(body.get("model") or ""), started, exc, request) from exc
        return self._logged_at_end(relay, operation, prompt_text=_messages_text(body.get("messages")), request=request)

    def _failed(self, operation: str, model: str, started: float, exc: Exception, request: str) -> LLMError:
        """Log a call that failed before any answer; return the LLMError to raise."""
        error = exc if isinstance(exc, LLMError) else LLMUnavailable(f"{exc.__class__.__name__}: {exc}")
        self.errors.append((operation, error))
        self._log(operation, model, 0, 0, int((time.monotonic() - started) * 1000), str(error), request=request)
        return error

    def _logged_at_end(self, answer, operation: str, *, prompt_text: str, request: str):
        """Log an open answer (a `ChatStream` or a `Relay`) once it ends, fails or is closed; return it."""

        def finished(done) -> None:
            note = ""
            if done.error is not None:
                self.errors.append((operation, done.error))
                note = str(done.error)
            elif done.cancelled:
                note = f"cancelled by the reader after {len(done.response.text)} characters"
            self._record(operation, done.response, prompt_text=prompt_text, error=note, request=request)

        answer.on_finish.append(finished)
        return answer

    def _record(
        self, operation: str, response: LLMResponse, *, prompt_text: str, error: str = "", request: str = ""
    ) -> None:
        if response.estimated_tokens and not response.prompt_tokens:
            response.prompt_tokens = estimate_tokens(prompt_text)
        if response.truncated:
            self.truncated.append(
                {
                    "operation": operation,
                    "max_tokens": response.max_tokens,
                    "completion_tokens": response.completion_tokens,
                }
            )
        self._log(
            operation,
            response.model,
            response.prompt_tokens,
            response.completion_tokens,
            response.latency_ms,
            error,
            request=request,
            answer=response.text or "",
        )

    def _log(
        self,
        operation: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        latency_ms: int,
        error: str,
        *,
        request: str = "",
        answer: str = "",
        refused: bool = False,
    ):
        from studio.memory.models import Job, LLMCall

        LLMCall.objects.create(
            game_save_id=self.game_save_id,
            job_id=self.job_id,
            user_id=self.user_id,
            refused=refused,
            operation=operation,
            model=model or "",
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_ms=latency_ms,
            error=error[:2000],
            request=request[:LOGGED_TEXT_CHARS],
            answer=(answer or "")[:LOGGED_TEXT_CHARS],
        )
        if refused:
            return
        self.calls += 1
        self.tokens += prompt_tokens + completion_tokens
        if self.job_id is not None:
            Job.objects.filter(pk=self.job_id).update(
                llm_calls=F("llm_calls") + 1, llm_tokens=F("llm_tokens") + prompt_tokens + completion_tokens
            )

    def last_error(self, operation: str | None = None) -> LLMError | None:
        for op, exc in reversed(self.errors):
            if operation is None or op == operation:
                return exc
        return None


def _messages_text(messages) -> str:
    return "".join(str(m.get("content") or "") for m in messages or [] if isinstance(m, dict))
