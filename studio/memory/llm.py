"""The LLM backend that fact extraction, consolidation and reflection talk to.

- `LLMBackend` is the protocol `factextract`, `consolidate` and `reflect` use: one method,
  `complete(system=..., prompt=..., operation=..., json_mode=...) -> str`.
- `OpenAICompatibleBackend` speaks the `/chat/completions` dialect that Ollama, llama.cpp
  server, vLLM, LM Studio and hosted APIs share: retries with backoff on 429/5xx and
  network errors, JSON mode when the server accepts `response_format` (and a fallback to
  plain prompting, remembered per endpoint and model, when it does not), a max-tokens cap
  and a model per operation (extract / consolidate / reflect).
- `TrackedLLM` wraps a backend for one job: it enforces the spend guard (calls and tokens
  per save per hour) and logs every call, failed ones too, as an `LLMCall` row.

`get_llm_backend()` builds the backend from settings, or returns None when no endpoint is
configured (living-mode jobs then end as "skipped: no LLM configured").
"""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

import httpx
from django.conf import settings
from django.db.models import Count, F, Min, Sum
from django.utils import timezone

logger = logging.getLogger(__name__)

OPERATIONS = ("extract", "consolidate", "reflect")


class LLMError(Exception):
    """A call to the LLM failed. `retryable` says whether running the job again may help."""

    retryable = True


class LLMUnavailable(LLMError):
    """The endpoint did not answer usefully (network error, timeout, 429 or 5xx) after retries."""


class LLMRequestRejected(LLMError):
    """The endpoint refused the request (a 4xx other than 429): wrong model, key, or payload."""

    retryable = False


class LLMNotConfigured(LLMError):
    retryable = False


class SpendLimitExceeded(LLMError):
    """The save used its hourly budget of calls or tokens; the job pauses until `resume_at`."""

    retryable = False

    def __init__(self, reason: str, resume_at: datetime):
        super().__init__(reason)
        self.reason = reason
        self.resume_at = resume_at


@dataclass
class LLMResponse:
    text: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: int = 0
    estimated_tokens: bool = False


@runtime_checkable
class LLMBackend(Protocol):
    """What the living-memory operations need from a language model."""

    def complete(self, *, system: str, prompt: str, operation: str = "", json_mode: bool = False) -> str:
        """Return the model's reply to `prompt` under the `system` instructions."""
        ...


def estimate_tokens(text: str) -> int:
    """Return a rough token count (4 characters a token) for servers that report no usage."""
    return max(1, len(text or "") // 4) if text else 0


# Endpoints (base URL, model) that rejected `response_format`: asked without it from then on.
_JSON_MODE_UNSUPPORTED: set[tuple[str, str]] = set()
_JSON_MODE_LOCK = threading.Lock()


class OpenAICompatibleBackend:
    """A client for any OpenAI-compatible chat-completions endpoint."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str = "",
        timeout: float = 60.0,
        max_retries: int = 3,
        max_tokens: int = 1024,
        operation_models: dict[str, str] | None = None,
        backoff_base: float = 0.5,
        backoff_max: float = 20.0,
        transport: httpx.BaseTransport | None = None,
        sleep=time.sleep,
    ):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.timeout = float(timeout)
        self.max_retries = max(0, int(max_retries))
        self.max_tokens = int(max_tokens)
        self.operation_models = {k: v for k, v in (operation_models or {}).items() if v}
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self._sleep = sleep
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.Client(
            timeout=httpx.Timeout(self.timeout, connect=min(10.0, self.timeout)),
            headers=headers,
            transport=transport,
        )

    def close(self) -> None:
        self._client.close()

    def model_for(self, operation: str) -> str:
        return self.operation_models.get(operation) or self.model

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def complete(self, *, system: str, prompt: str, operation: str = "", json_mode: bool = False) -> str:
        return self.chat(system=system, prompt=prompt, operation=operation, json_mode=json_mode).text

    def chat(self, *, system: str, prompt: str, operation: str = "", json_mode: bool = False) -> LLMResponse:
        """Send one chat request; retry transient failures; return the text and token usage."""
        model = self.model_for(operation)
        messages = []
        if system:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": prompt})
        body = {"model": model, "messages": messages, "max_tokens": self.max_tokens, "temperature": 0}
        key = (self.base_url, model)
        use_json = json_mode and key not in _JSON_MODE_UNSUPPORTED
        attempt = 0
        started = time.monotonic()
        while True:
            payload = dict(body)
            if use_json:
                payload["response_format"] = {"type": "json_object"}
            delay = None
            try:
                response = self._client.post(self.url, json=payload)
            except httpx.TimeoutException as exc:
                error: LLMError = LLMUnavailable(f"timed out after {self.timeout:g}s ({exc.__class__.__name__})")
            except httpx.HTTPError as exc:
                error = LLMUnavailable(f"could not reach {self.url}: {exc}")
            else:
                status = response.status_code
                if status == 200:
                    return self._parse(response, model, started)
                detail = response.text[:300]
                if use_json and status in (400, 415, 422):
                    # Many local servers reject `response_format`; ask again without it and
                    # remember, so the next calls don't pay for the refusal.
                    with _JSON_MODE_LOCK:
                        _JSON_MODE_UNSUPPORTED.add(key)
                    use_json = False
                    logger.info("LLM endpoint %s rejected JSON mode (%s); falling back", self.url, status)
                    continue
                if status == 429 or status >= 500:
                    error = LLMUnavailable(f"HTTP {status} from {self.url}: {detail}")
                    delay = _retry_after(response)
                else:
                    raise LLMRequestRejected(f"HTTP {status} from {self.url}: {detail}")
            if attempt >= self.max_retries:
                raise error
            wait = self.backoff_base * (2**attempt)
            if delay is not None:
                wait = max(wait, delay)
            self._sleep(min(wait, self.backoff_max))
            attempt += 1

    def _parse(self, response: httpx.Response, model: str, started: float) -> LLMResponse:
        latency_ms = int((time.monotonic() - started) * 1000)
        try:
            data = response.json()
            message = data["choices"][0]["message"]
            text = message.get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise LLMUnavailable(f"malformed chat-completions response: {response.text[:200]!r}") from exc
        usage = data.get("usage") or {}
        prompt_tokens = _int(usage.get("prompt_tokens"))
        completion_tokens = _int(usage.get("completion_tokens"))
        estimated = not usage
        if estimated:
            completion_tokens = estimate_tokens(text)
        return LLMResponse(
            text=str(text),
            model=str(data.get("model") or model),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_ms=latency_ms,
            estimated_tokens=estimated,
        )


def _int(value) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After", "").strip()
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


_BACKENDS: dict[tuple, OpenAICompatibleBackend] = {}
_BACKENDS_LOCK = threading.Lock()


def get_llm_backend() -> OpenAICompatibleBackend | None:
    """Return the backend configured in settings, or None when no endpoint is set.

    One backend (and its pooled HTTP client) per process and configuration: building an
    httpx client loads the TLS trust store, which costs tens of milliseconds per job.
    """
    base_url = settings.AXIOM_LLM_BASE_URL
    if not base_url:
        return None
    options = {
        "base_url": base_url,
        "model": settings.AXIOM_LLM_MODEL or "default",
        "api_key": settings.AXIOM_LLM_API_KEY,
        "timeout": settings.AXIOM_LLM_TIMEOUT,
        "max_retries": settings.AXIOM_LLM_MAX_RETRIES,
        "max_tokens": settings.AXIOM_LLM_MAX_TOKENS,
        "operation_models": {
            "extract": settings.AXIOM_LLM_MODEL_EXTRACT,
            "consolidate": settings.AXIOM_LLM_MODEL_CONSOLIDATE,
            "reflect": settings.AXIOM_LLM_MODEL_REFLECT,
        },
    }
    key = (os.getpid(), repr(sorted(options.items())))
    with _BACKENDS_LOCK:
        backend = _BACKENDS.get(key)
        if backend is None:
            backend = _BACKENDS[key] = OpenAICompatibleBackend(**options)
        return backend


# -- spend guard and call log ---------------------------------------------------------------


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


def spend_status(*, game_save_id: int, now: datetime | None = None) -> SpendStatus:
    """Return a save's LLM use over the last hour against the configured caps."""
    from studio.memory.models import LLMCall

    now = now or timezone.now()
    agg = LLMCall.objects.filter(game_save_id=game_save_id, created_at__gt=now - timedelta(hours=1)).aggregate(
        n=Count("id"), p=Sum("prompt_tokens"), c=Sum("completion_tokens"), oldest=Min("created_at")
    )
    return SpendStatus(
        calls=agg["n"] or 0,
        tokens=(agg["p"] or 0) + (agg["c"] or 0),
        calls_cap=settings.AXIOM_LLM_CALLS_PER_HOUR,
        tokens_cap=settings.AXIOM_LLM_TOKENS_PER_HOUR,
        oldest=agg["oldest"],
    )


class TrackedLLM:
    """A backend bound to one job: checks the spend guard, logs each call as an LLMCall.

    The last failure is kept in `errors` so a job can tell "the model said nothing useful"
    from "the call failed" even though the seed operations swallow exceptions.
    """

    def __init__(self, backend: LLMBackend, *, game_save_id: int | None = None, job_id: int | None = None):
        self.backend = backend
        self.game_save_id = game_save_id
        self.job_id = job_id
        self.calls = 0
        self.tokens = 0
        self.errors: list[tuple[str, LLMError]] = []

    def check_budget(self) -> None:
        if self.game_save_id is None:
            return
        if settings.AXIOM_LLM_CALLS_PER_HOUR <= 0 and settings.AXIOM_LLM_TOKENS_PER_HOUR <= 0:
            return
        status = spend_status(game_save_id=self.game_save_id)
        if status.exceeded:
            resume_at = (status.oldest or timezone.now()) + timedelta(hours=1)
            if status.calls_cap > 0 and status.calls >= status.calls_cap:
                what = f"{status.calls} LLM calls in the last hour (cap {status.calls_cap})"
            else:
                what = f"{status.tokens} LLM tokens in the last hour (cap {status.tokens_cap})"
            raise SpendLimitExceeded(
                f"spend guard: this save used {what}; paused until {resume_at:%H:%M} UTC", resume_at
            )

    def complete(self, *, system: str, prompt: str, operation: str = "", json_mode: bool = False) -> str:
        try:
            self.check_budget()
        except SpendLimitExceeded as exc:
            self.errors.append((operation, exc))
            raise
        model = getattr(self.backend, "model_for", lambda op: "")(operation)
        started = time.monotonic()
        try:
            if hasattr(self.backend, "chat"):
                response = self.backend.chat(system=system, prompt=prompt, operation=operation, json_mode=json_mode)
            else:
                text = self.backend.complete(system=system, prompt=prompt, operation=operation, json_mode=json_mode)
                response = LLMResponse(
                    text=text,
                    model=model,
                    prompt_tokens=estimate_tokens(system + prompt),
                    completion_tokens=estimate_tokens(text),
                    latency_ms=int((time.monotonic() - started) * 1000),
                    estimated_tokens=True,
                )
        except Exception as exc:
            error = exc if isinstance(exc, LLMError) else LLMUnavailable(f"{exc.__class__.__name__}: {exc}")
            self.errors.append((operation, error))
            self._log(operation, model, 0, 0, int((time.monotonic() - started) * 1000), str(error))
            raise error from exc
        if response.estimated_tokens and not response.prompt_tokens:
            response.prompt_tokens = estimate_tokens(system + prompt)
        self._log(
            operation, response.model, response.prompt_tokens, response.completion_tokens, response.latency_ms, ""
        )
        return response.text

    def _log(self, operation: str, model: str, prompt_tokens: int, completion_tokens: int, latency_ms: int, error: str):
        from studio.memory.models import Job, LLMCall

        LLMCall.objects.create(
            game_save_id=self.game_save_id,
            job_id=self.job_id,
            operation=operation,
            model=model or "",
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_ms=latency_ms,
            error=error[:2000],
        )
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


# -- parsing model output -------------------------------------------------------------------

_FENCE = "```"


def strip_code_fences(text: str) -> str:
    """Return the inside of the first ``` fenced block, or `text` unchanged without one."""
    text = text or ""
    start = text.find(_FENCE)
    if start < 0:
        return text
    body_start = text.find("\n", start)
    if body_start < 0:
        return text
    end = text.find(_FENCE, body_start)
    return text[body_start + 1 : end if end >= 0 else len(text)]


def parse_json_payload(text: str):
    """Return the first JSON object or array found in `text` (fences and prose tolerated).

    Return None when nothing decodes. Tries the fenced block, then the whole text, then
    every `{` / `[` position (so "Here you go: {...} Hope it helps" works).
    """
    import json

    decoder = json.JSONDecoder()
    for candidate in (strip_code_fences(text), text or ""):
        stripped = candidate.strip()
        if not stripped:
            continue
        try:
            return json.loads(stripped)
        except ValueError:
            pass
        for index, char in enumerate(stripped):
            if char in "{[":
                try:
                    value, _ = decoder.raw_decode(stripped, index)
                except ValueError:
                    continue
                if isinstance(value, (dict, list)):
                    return value
    return None


def salvage_json_objects(text: str) -> list[dict]:
    """Return every complete JSON object in `text`, skipping broken or truncated ones.

    Used when the whole answer does not decode (a list cut off by the token limit, one bad
    item): the complete items are kept. Objects nested in a decoded object are not
    returned separately.
    """
    import json

    decoder = json.JSONDecoder()
    text = strip_code_fences(text or "")
    found: list[dict] = []
    index = 0
    while True:
        index = text.find("{", index)
        if index < 0:
            return found
        try:
            value, end = decoder.raw_decode(text, index)
        except ValueError:
            index += 1
            continue
        if isinstance(value, dict):
            found.append(value)
        index = end


def parse_items(text: str, key: str) -> list | None:
    """Return the list of items under `key` in a model answer, tolerating its failure modes.

    Accepts {key: [...]}, a bare list, a single item object, fenced or prose-wrapped JSON,
    and a truncated answer (its complete item objects are kept). Return None when the
    answer holds no JSON at all, and raise ValueError when it is JSON but not a list or object.
    """
    import json

    payload = None
    for candidate in (strip_code_fences(text), text or ""):
        try:
            payload = json.loads(candidate.strip())
            break
        except ValueError:
            continue
    if payload is None:
        salvaged = salvage_json_objects(text)
        payload = salvaged if salvaged else parse_json_payload(text)
    if payload is None:
        return None
    if isinstance(payload, dict):
        payload = [payload]
    if not isinstance(payload, list):
        raise ValueError(f"unexpected JSON in the answer: {str(text)[:120]!r}")
    items: list = []
    for element in payload:
        if isinstance(element, dict) and key in element:
            if isinstance(element[key], list):
                items.extend(element[key])
        else:
            items.append(element)
    return items
