"""The HTTP client for OpenAI-compatible `/chat/completions` servers.

One request loop serves `chat` (one JSON answer) and `stream` (server-sent events):

- Retries: network errors, timeouts, 429 and 5xx are retried `max_retries` times with
  exponential backoff (or `Retry-After`); other 4xx raise `LLMRequestRejected` at once.
- Structured outputs: a request with a JSON schema tries the modes of `capabilities.MODES`
  in order. A 400/415/422, or a 5xx whose body names `response_format`, is a refusal of that
  mode: the next mode is asked at once and the refusal remembered. A bare 5xx on a mode
  never seen working may be a refusal too (llama-cpp-python's server answers `json_schema`
  with HTTP 500): the next mode is asked at once, in place of the first retry. If it works,
  the first mode is remembered as refused; if it fails with a 5xx as well, that is an
  outage, and the remaining retries use the first mode again.
- Sampling fields (temperature, penalties, `stream_options`) are sent only when set; a
  4xx naming one drops it (remembered). An unexplained 4xx on a plain-text request that
  carried such fields is retried once without any of them.
- A context-length error is a rejection, never a format refusal.
- Streaming: `stream()` opens the request (refusals, retries and fallbacks happen before
  the first delta) and returns a `ChatStream`, an iterator of text deltas. After the last
  delta `stream.response` holds the full text, `finish_reason` and usage. Closing the
  stream (or leaving its `with` block) closes the HTTP connection, which is how a server
  learns that the reader went away. An error after the first delta raises
  `LLMUnavailable` from the iterator; nothing is retried once text has been yielded.
- Stopping from another thread: `stream(abort=StreamAbort())` sends the request on a
  connection of its own, whose socket `abort()` shuts down (`abort.py`): before the answer
  began `stream()` raises `LLMCancelled`, after it the stream ends "cancelled".
"""

from __future__ import annotations

import json
import logging
import threading
import time

import httpx

from studio.memory.llm.abort import StreamAbort
from studio.memory.llm.base import (
    SAMPLING_FIELDS,
    LLMCancelled,
    LLMError,
    LLMRequestRejected,
    LLMResponse,
    LLMUnavailable,
    OperationOptions,
    estimate_tokens,
)
from studio.memory.llm.capabilities import CAPABILITIES, EndpointCapabilities, mode_chain, response_format_for
from studio.memory.llm.streaming import AnswerStream

logger = logging.getLogger(__name__)

DROPPABLE_FIELDS = (*SAMPLING_FIELDS, "stream_options")
_FORMAT_WORDS = ("response_format", "json_schema", "json_object")
_CONTEXT_WORDS = ("context_length", "context length", "context window", "maximum context")


def schema_instruction(schema: dict) -> str:
    """Return the sentence that carries the schema in a prompt (modes without server support)."""
    return "Answer with one JSON value that matches this JSON schema:\n" + json.dumps(schema, ensure_ascii=False)


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
        operation_options: dict[str, OperationOptions | dict] | None = None,
        backoff_base: float = 0.5,
        backoff_max: float = 20.0,
        transport: httpx.BaseTransport | None = None,
        capabilities: EndpointCapabilities | None = None,
        stream_all: bool = False,
        sleep=time.sleep,
    ):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.timeout = float(timeout)
        self.max_retries = max(0, int(max_retries))
        self.max_tokens = int(max_tokens)
        self.operation_models = {k: v for k, v in (operation_models or {}).items() if v}
        self.operation_options = {k: OperationOptions.from_value(v) for k, v in (operation_options or {}).items()}
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.capabilities = capabilities if capabilities is not None else CAPABILITIES
        # Stream every call (chat() reads the stream to its end): a timeout or a killed job
        # then closes the connection and the server stops generating, and the timeout is the
        # wait for the next token rather than for the whole answer.
        self.stream_all = bool(stream_all)
        self._sleep = sleep
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.Client(timeout=self._timeout(self.timeout), headers=headers, transport=transport)
        self._transport = transport
        self._own_client: httpx.Client | None = None  # built at the first abortable stream
        self._own_lock = threading.Lock()

    def close(self) -> None:
        self._client.close()
        if self._own_client is not None:
            self._own_client.close()

    def _abortable_client(self) -> httpx.Client:
        """The client of abortable streams: a connection each, never kept (its socket is the abort's)."""
        with self._own_lock:
            if self._own_client is None:
                self._own_client = httpx.Client(
                    timeout=self._timeout(self.timeout),
                    headers=self._client.headers,
                    transport=self._transport,
                    limits=httpx.Limits(max_keepalive_connections=0),
                )
            return self._own_client

    def _send_streamed(self, request: httpx.Request, *, abort: StreamAbort | None = None) -> httpx.Response:
        """Send `request` and return its open response; with `abort`, on a connection of its own.

        Raise LLMCancelled when `abort` ended it before the answer began.
        """
        if abort is None:
            return self._client.send(request, stream=True)
        request.extensions["trace"] = abort.trace
        if not abort.aborted:
            try:
                return self._abortable_client().send(request, stream=True)
            except httpx.HTTPError:
                if not abort.aborted:
                    raise
        raise LLMCancelled("stopped before the answer began")

    def model_for(self, operation: str) -> str:
        return self.operation_models.get(operation) or self.model

    def options_for(self, operation: str) -> OperationOptions:
        return self.operation_options.get(operation) or OperationOptions()

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    @staticmethod
    def _timeout(seconds: float) -> httpx.Timeout:
        return httpx.Timeout(seconds, connect=min(10.0, seconds))

    # -- public calls ---------------------------------------------------------------------

    def complete(self, *, system: str, prompt: str, operation: str = "", json_mode: bool = False) -> str:
        return self.chat(system=system, prompt=prompt, operation=operation, json_mode=json_mode).text

    def chat(
        self,
        *,
        system: str = "",
        prompt: str = "",
        operation: str = "",
        json_mode: bool = False,
        schema: dict | None = None,
        schema_name: str = "",
        messages: list[dict] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stream: bool | None = None,
        sampling: dict | None = None,
    ) -> LLMResponse:
        """Send one request and return the whole answer (retries and fallbacks included).

        `stream` (default: the backend's `stream_all`) reads the answer as a stream.
        """
        if self.stream_all if stream is None else stream:
            with self.stream(
                system=system,
                prompt=prompt,
                operation=operation,
                json_mode=json_mode,
                schema=schema,
                schema_name=schema_name,
                messages=messages,
                max_tokens=max_tokens,
                temperature=temperature,
                sampling=sampling,
            ) as chat_stream:
                for _ in chat_stream:
                    pass
            return chat_stream.response
        started = time.monotonic()
        response, sent = self._open(
            operation=operation,
            system=system,
            prompt=prompt,
            messages=messages,
            json_mode=json_mode,
            schema=schema,
            schema_name=schema_name or operation,
            max_tokens=max_tokens,
            temperature=temperature,
            stream=False,
            sampling=sampling,
        )
        try:
            return self._parse(response, sent, started)
        finally:
            response.close()

    def stream(
        self,
        *,
        system: str = "",
        prompt: str = "",
        operation: str = "narrate",
        json_mode: bool = False,
        schema: dict | None = None,
        schema_name: str = "",
        messages: list[dict] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        sampling: dict | None = None,
        abort: StreamAbort | None = None,
    ) -> "ChatStream":
        """Open a streamed request; return the iterator of its text deltas.

        `sampling`: request-level sampling fields (`SAMPLING_FIELDS`, e.g. a save's sampler
        settings) over the operation's own; None values are not sent. `abort`: a switch
        another thread may flip to end the request at once (raises LLMCancelled before the
        answer began; the stream ends "cancelled" after).
        """
        started = time.monotonic()
        response, sent = self._open(
            operation=operation,
            system=system,
            prompt=prompt,
            messages=messages,
            json_mode=json_mode,
            schema=schema,
            schema_name=schema_name or operation,
            max_tokens=max_tokens,
            temperature=temperature,
            stream=True,
            sampling=sampling,
            abort=abort,
        )
        return ChatStream(response, sent=sent, started=started, abort=abort)

    # -- the request loop -----------------------------------------------------------------

    def _open(
        self,
        *,
        operation,
        system,
        prompt,
        messages,
        json_mode,
        schema,
        schema_name,
        max_tokens,
        temperature,
        stream,
        sampling=None,
        abort: StreamAbort | None = None,
    ) -> tuple[httpx.Response, dict]:
        model = self.model_for(operation)
        options = self.options_for(operation)
        key = (self.base_url, model)
        caps = self.capabilities
        modes = caps.modes_to_try(key, mode_chain(schema=schema, json_mode=json_mode, allowed=options.modes))
        limit = int(max_tokens or options.max_tokens or self.max_tokens)
        timeout = self._timeout(float(options.timeout or self.timeout))
        optional = options.sampling()
        optional.update({k: v for k, v in (sampling or {}).items() if k in SAMPLING_FIELDS and v is not None})
        if temperature is not None:
            optional["temperature"] = temperature
        if stream:
            optional["stream_options"] = {"include_usage": True}
        dropped: set[str] = set(caps.refused_fields(key))
        index = 0  # into `modes`
        attempt = 0
        probe_from: int | None = None  # the mode index whose bare 5xx is being checked
        probed = False
        stripped_all = False
        dropped_before_strip: set[str] = set()
        while True:
            mode = modes[index]
            extras = {k: v for k, v in optional.items() if k not in dropped}
            payload = self._payload(
                model=model,
                system=system,
                prompt=prompt,
                messages=messages,
                mode=mode,
                schema=schema,
                schema_name=schema_name,
                limit=limit,
                extras=extras,
                stream=stream,
            )
            delay = None
            try:
                if stream:
                    response = self._send_streamed(
                        self._client.build_request("POST", self.url, json=payload, timeout=timeout), abort=abort
                    )
                else:
                    response = self._client.post(self.url, json=payload, timeout=timeout)
            except httpx.TimeoutException as exc:
                hint = "AXIOM_LLM_TIMEOUT" + (f" or AXIOM_LLM_TIMEOUT_{operation.upper()}" if operation else "")
                error: LLMError = LLMUnavailable(
                    f"timed out after {timeout.read:g}s ({exc.__class__.__name__}); a slow model needs a larger {hint}"
                )
            except httpx.HTTPError as exc:
                error = LLMUnavailable(f"could not reach {self.url}: {exc}")
            else:
                status = response.status_code
                if status == 200:
                    if mode != "text":
                        caps.confirm_mode(key, mode)
                    if probe_from is not None and index > probe_from:
                        caps.refuse_mode(key, modes[probe_from])
                        logger.info(
                            "LLM %s %s: HTTP 5xx on %s was a refusal; %s works",
                            self.url,
                            model,
                            modes[probe_from],
                            mode,
                        )
                    if stripped_all:
                        caps.refuse_fields(key, set(optional) - dropped_before_strip)
                    sent = {
                        "model": model,
                        "mode": mode,
                        "max_tokens": limit,
                        "operation": operation,
                        "dropped": sorted(set(optional) - set(extras)),
                    }
                    return response, sent
                if stream:
                    response.read()
                detail = response.text[:500]
                response.close()
                lowered = detail.lower()
                format_named = any(word in lowered for word in _FORMAT_WORDS)
                named = [k for k in extras if k in lowered]
                if status in (400, 422) and named and not format_named:
                    dropped.update(named)
                    caps.refuse_fields(key, named)
                    logger.info("LLM %s %s refused %s (HTTP %s); not sent from now on", self.url, model, named, status)
                    continue
                if any(word in lowered for word in _CONTEXT_WORDS):
                    raise LLMRequestRejected(f"HTTP {status} from {self.url}: {detail[:300]}")
                if mode != "text" and (status in (400, 415, 422) or (status >= 500 and format_named)):
                    caps.refuse_mode(key, mode)
                    logger.info(
                        "LLM %s %s refused %s (HTTP %s); trying %s", self.url, model, mode, status, modes[index + 1]
                    )
                    index += 1
                    continue
                if mode != "text" and status >= 500 and not probed and not caps.is_confirmed(key, mode):
                    # Refusal or outage? Ask the next mode at once, in place of the first retry.
                    probed = True
                    probe_from = index
                    index += 1
                    if attempt < self.max_retries:
                        attempt += 1
                    continue
                if probe_from is not None and status >= 500:
                    index = probe_from  # both modes failed: an outage, not a refusal
                    probe_from = None
                if status in (400, 422) and mode == "text" and extras and not stripped_all:
                    stripped_all = True
                    dropped_before_strip = set(dropped)
                    dropped.update(extras)
                    continue
                if status == 429 or status >= 500:
                    error = LLMUnavailable(f"HTTP {status} from {self.url}: {detail[:300]}")
                    delay = _retry_after(response)
                else:
                    raise LLMRequestRejected(f"HTTP {status} from {self.url}: {detail[:300]}")
            if attempt >= self.max_retries:
                raise error
            self._back_off(attempt, delay)
            attempt += 1

    def _back_off(self, attempt: int, delay: float | None) -> None:
        """Sleep before retry `attempt` + 1: exponential from `backoff_base`, at least the server's
        `Retry-After` (`delay`), at most `backoff_max` (the memory proxy's relays wait the same)."""
        wait = self.backoff_base * (2**attempt)
        if delay is not None:
            wait = max(wait, delay)
        self._sleep(min(wait, self.backoff_max))

    def _payload(self, *, model, system, prompt, messages, mode, schema, schema_name, limit, extras, stream) -> dict:
        if messages is None:
            messages = []
            if system:
                messages.append({"role": "system", "content": system})
            messages.append({"role": "user", "content": prompt})
        else:
            messages = [dict(m) for m in messages]
        if schema and mode in ("json_object", "text"):
            instruction = schema_instruction(schema)
            if messages and messages[0].get("role") == "system":
                messages[0]["content"] = f"{messages[0].get('content') or ''}\n\n{instruction}".strip()
            else:
                messages.insert(0, {"role": "system", "content": instruction})
        body = {"model": model, "messages": messages, "max_tokens": limit, **extras}
        response_format = response_format_for(mode, schema=schema, name=schema_name)
        if response_format is not None:
            body["response_format"] = response_format
        if stream:
            body["stream"] = True
        return body

    def _parse(self, response: httpx.Response, sent: dict, started: float) -> LLMResponse:
        latency_ms = int((time.monotonic() - started) * 1000)
        try:
            data = response.json()
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise LLMUnavailable(f"malformed chat-completions response: {response.text[:200]!r}") from exc
        return _response(
            text=str(text),
            data=data,
            finish_reason=choice.get("finish_reason"),
            usage=data.get("usage"),
            sent=sent,
            latency_ms=latency_ms,
        )


def _response(
    *, text: str, data: dict, finish_reason, usage, sent: dict, latency_ms: int, first_token_ms=None
) -> LLMResponse:
    usage = usage if isinstance(usage, dict) else {}
    completion_tokens = _int(usage.get("completion_tokens"))
    estimated = not usage
    if estimated:
        completion_tokens = estimate_tokens(text)
    return LLMResponse(
        text=text,
        model=str((data or {}).get("model") or sent["model"]),
        prompt_tokens=_int(usage.get("prompt_tokens")),
        completion_tokens=completion_tokens,
        latency_ms=latency_ms,
        estimated_tokens=estimated,
        finish_reason=str(finish_reason or ""),
        mode=sent["mode"],
        max_tokens=sent["max_tokens"],
        first_token_ms=first_token_ms,
        dropped_params=list(sent.get("dropped") or []),
    )


class ChatStream(AnswerStream):
    """The text deltas of one streamed answer; `response` is set once it ended.

    Iterate it (or use it as a context manager and iterate). `close()` before the end
    closes the HTTP connection and ends the stream with `finish_reason` "cancelled".
    `on_finish(stream)` callbacks run exactly once, at the end, on error or on close. An
    error after the first delta is raised from the iterator once the stream has finished.
    """

    def __init__(self, response: httpx.Response, *, sent: dict, started: float, abort: StreamAbort | None = None):
        self.sent = sent
        super().__init__(response, model=sent["model"], started=started, abort=abort)

    def _read_document(self, data) -> str:
        # The server ignored `stream: true` and sent one JSON answer: it must hold a choice.
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
            raise ValueError(f"no choices in {str(data)[:200]!r}")
        return super()._read_document(data)

    def _response(self, finish_reason: str) -> LLMResponse:
        return _response(
            text=self.text,
            data={"model": self.model},
            finish_reason=finish_reason,
            usage=self._usage or None,
            sent=self.sent,
            latency_ms=int((time.monotonic() - self.started) * 1000),
            first_token_ms=self._first_ms,
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
