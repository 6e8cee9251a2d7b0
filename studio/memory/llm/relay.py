"""Relay a caller's own chat-completions body to the configured endpoint, bytes unchanged.

The memory proxy (`studio/proxy/`) forwards what a chat front end sent (its messages with the
memory context added, its sampling fields, stop strings, `stream`) rather than a prompt the
studio wrote, and hands the answer back exactly as the endpoint sent it. It goes through the
same `OpenAICompatibleBackend` as every other call (its pooled HTTP client, URL, key and
timeout) and, through `TrackedLLM.relay`, the same spend guard and call log.

- `relay_open(backend, body, stream=...)` posts `body` to the backend's `/chat/completions`.
  Network errors, timeouts, 429 and 5xx are retried like the backend's own calls (its
  `max_retries`, exponential backoff, `Retry-After`), all before the first byte reaches the
  caller. Any other status raises `RelayRefused` with the endpoint's status, content type
  and body, which the proxy passes back as they are.
- `Relay` is the answer. Iterating it yields the raw bytes of the response body (server-sent
  events as the endpoint wrote them, or one JSON document); while they pass, the text, the
  finish reason, usage and model are read out of them, so `relay.response` (an
  `LLMResponse`) holds the whole answer when the body ended. `close()` before the end closes
  the upstream connection (the endpoint stops generating) and ends the relay "cancelled".
  `on_finish(relay)` callbacks run once, at the end, on error or on close.
"""
from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator

import httpx

from studio.memory.llm.base import LLMError, LLMRequestRejected, LLMResponse, LLMUnavailable, estimate_tokens

logger = logging.getLogger(__name__)


class RelayRefused(LLMRequestRejected):
    """The endpoint answered with a status other than 200 (after retries): passed back as is."""

    def __init__(self, status: int, body: bytes, content_type: str):
        super().__init__(f"HTTP {status} from the endpoint: {body[:300].decode('utf-8', 'replace')}")
        self.status = status
        self.body = body
        self.content_type = content_type or "application/json"


def relay_open(backend, body: dict, *, stream: bool) -> "Relay":
    """Send `body` to `backend`'s chat-completions URL; return the open `Relay` (HTTP 200).

    Raise `LLMUnavailable` when the endpoint cannot be reached after the backend's retries,
    `RelayRefused` for any other refusal (with the endpoint's own status and body).
    """
    started = time.monotonic()
    attempt = 0
    while True:
        delay = None
        try:
            response = backend._client.send(
                backend._client.build_request("POST", backend.url, json=body, timeout=backend._timeout(backend.timeout)),
                stream=True,
            )
        except httpx.TimeoutException as exc:
            error: LLMError = LLMUnavailable(f"timed out after {backend.timeout:g}s ({exc.__class__.__name__})")
        except httpx.HTTPError as exc:
            error = LLMUnavailable(f"could not reach {backend.url}: {exc}")
        else:
            if response.status_code == 200:
                return Relay(response, model=str(body.get("model") or ""), started=started, stream=stream)
            raw = response.read()
            response.close()
            if response.status_code != 429 and response.status_code < 500:
                raise RelayRefused(response.status_code, raw, response.headers.get("content-type", ""))
            error = RelayRefused(response.status_code, raw, response.headers.get("content-type", ""))
            retry_after = response.headers.get("Retry-After", "").strip()
            try:
                delay = float(retry_after) if retry_after else None
            except ValueError:
                delay = None
        if attempt >= backend.max_retries:
            raise error
        wait = backend.backoff_base * (2**attempt)
        if delay is not None:
            wait = max(wait, delay)
        backend._sleep(min(wait, backend.backoff_max))
        attempt += 1


class Relay:
    """The endpoint's answer, relayed byte for byte; `response` is set once it ended."""

    def __init__(self, http: httpx.Response, *, model: str, started: float, stream: bool):
        self._http = http
        self.model = model
        self.started = started
        self.stream = stream
        self.content_type = http.headers.get("content-type", "application/json")
        self.response: LLMResponse | None = None
        self.error: LLMError | None = None
        self.cancelled = False
        self.on_finish: list[Callable[["Relay"], None]] = []
        self._parts: list[str] = []
        self._finish_reason = ""
        self._usage: dict = {}
        self._first_byte_ms: int | None = None
        self._finished = False
        self._gen = self._bytes()

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        return next(self._gen)

    def read(self) -> bytes:
        """Return the whole body (a non-streamed answer)."""
        return b"".join(self)

    def close(self) -> None:
        """Stop relaying: close the upstream connection; the relay ends "cancelled"."""
        if self._finished:
            return
        self.cancelled = True
        self._gen.close()
        self._http.close()
        self._finish("cancelled")

    def _finish(self, finish_reason: str) -> None:
        if self._finished:
            return
        self._finished = True
        usage = self._usage
        text = self.text
        self.response = LLMResponse(
            text=text,
            model=self.model,
            prompt_tokens=_int(usage.get("prompt_tokens")),
            completion_tokens=_int(usage.get("completion_tokens")) if usage else estimate_tokens(text),
            latency_ms=int((time.monotonic() - self.started) * 1000),
            estimated_tokens=not usage,
            finish_reason=finish_reason,
            first_token_ms=self._first_byte_ms,
        )
        for callback in self.on_finish:
            try:
                callback(self)
            except Exception:  # noqa: BLE001 - a logging hook must not break the reader
                logger.exception("Relay on_finish callback failed")

    def _read_data(self, data: dict) -> None:
        if data.get("model"):
            self.model = str(data["model"])
        if isinstance(data.get("usage"), dict) and data["usage"]:
            self._usage = data["usage"]
        for choice in data.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            part = choice.get("delta") or choice.get("message") or {}
            text = part.get("content") if isinstance(part, dict) else None
            if text:
                self._parts.append(str(text))
            if choice.get("finish_reason"):
                self._finish_reason = str(choice["finish_reason"])

    def _bytes(self) -> Iterator[bytes]:
        event_stream = "text/event-stream" in self.content_type
        pending = b""
        ended = False
        try:
            for chunk in self._http.iter_raw():
                if not chunk:
                    continue
                if self._first_byte_ms is None:
                    self._first_byte_ms = int((time.monotonic() - self.started) * 1000)
                yield chunk  # unchanged, before it is read: an error event reaches the caller too
                pending += chunk
                if event_stream:
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        ended = self._read_line(line) or ended
            if event_stream:
                ended = self._read_line(pending) or ended
                if not ended and not self._finish_reason:
                    raise LLMUnavailable(f"the stream ended unfinished after {len(self.text)} characters")
            else:
                self._read_data(json.loads(pending or b"{}"))
        except httpx.HTTPError as exc:
            self.error = LLMUnavailable(f"the stream broke after {len(self.text)} characters: {exc}")
        except LLMError as exc:
            self.error = exc
        except (ValueError, TypeError, AttributeError) as exc:
            self.error = LLMUnavailable(f"malformed answer: {exc}")
        finally:
            if not self.cancelled:
                self._http.close()
        self._finish("error" if self.error is not None else self._finish_reason)

    def _read_line(self, raw: bytes) -> bool:
        """Read one SSE line; return True at `data: [DONE]`."""
        line = raw.decode("utf-8", "replace").rstrip("\r")
        if not line.startswith("data:"):
            return False
        payload = line[5:].strip()
        if payload == "[DONE]":
            return True
        if payload:
            data = json.loads(payload)
            if isinstance(data, dict):
                if isinstance(data.get("error"), (dict, str)):
                    raise LLMUnavailable(f"the endpoint reported an error mid-stream: {str(data['error'])[:300]}")
                self._read_data(data)
        return False


def _int(value) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0
