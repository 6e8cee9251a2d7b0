"""Relay a caller's own chat-completions body to the configured endpoint, bytes unchanged.

The memory proxy (`studio/proxy/`) forwards what a chat front end sent (its messages with the
memory context added, its sampling fields, stop strings, `stream`) rather than a prompt the
studio wrote, and hands the answer back exactly as the endpoint sent it. It goes through the
same `OpenAICompatibleBackend` as every other call (its pooled HTTP client, URL, key and
timeout) and, through `TrackedLLM.relay`, the same spend guard and call log.

- `relay_open(backend, body, stream=..., abort=None)` posts `body` to the backend's
  `/chat/completions`. Network errors, timeouts, 429 and 5xx are retried like the backend's
  own calls (its `max_retries`, exponential backoff, `Retry-After`), all before the first
  byte reaches the caller. Any other status raises `RelayRefused` with the endpoint's
  status, content type and body, which the proxy passes back as they are.
- `abort` (`abort.StreamAbort`, the proxy's watch on its own client) is the client's Stop
  from another thread: the request then goes on a connection of its own (the backend's
  `_send_streamed`), and flipping the switch ends it at once, even while opening blocks
  (llama-cpp-python sends its headers only with the first chunk, after reading the whole
  prompt): before the answer began `relay_open` raises `LLMCancelled` (never retried),
  after it the relay ends "cancelled".
- `Relay` is the answer. Iterating it yields the raw bytes of the response body (server-sent
  events as the endpoint wrote them, or one JSON document); while they pass, the text, the
  finish reason, usage and model are read out of them (by `streaming.AnswerStream`, the
  reader it shares with the client's `ChatStream`), so `relay.response` (an `LLMResponse`)
  holds the whole answer when the body ended. `close()` before the end closes the upstream
  connection (the endpoint stops generating) and ends the relay "cancelled".
  `on_finish(relay)` callbacks run once, at the end, on error or on close.
"""

from __future__ import annotations

import time

import httpx

from studio.memory.llm.abort import StreamAbort
from studio.memory.llm.base import LLMCancelled, LLMError, LLMRequestRejected, LLMUnavailable
from studio.memory.llm.client import _retry_after
from studio.memory.llm.streaming import AnswerStream


class RelayRefused(LLMRequestRejected):
    """The endpoint answered with a status other than 200 (after retries): passed back as is."""

    def __init__(self, status: int, body: bytes, content_type: str):
        super().__init__(f"HTTP {status} from the endpoint: {body[:300].decode('utf-8', 'replace')}")
        self.status = status
        self.body = body
        self.content_type = content_type or "application/json"


def relay_open(backend, body: dict, *, stream: bool, abort: StreamAbort | None = None) -> "Relay":
    """Send `body` to `backend`'s chat-completions URL; return the open `Relay` (HTTP 200).

    Raise `LLMUnavailable` when the endpoint cannot be reached after the backend's retries,
    `RelayRefused` for any other refusal (with the endpoint's own status and body),
    `LLMCancelled` when `abort` ended it before the answer began.
    """
    started = time.monotonic()
    attempt = 0
    while True:
        delay = None
        try:
            response = backend._send_streamed(
                backend._client.build_request(
                    "POST", backend.url, json=body, timeout=backend._timeout(backend.timeout)
                ),
                abort=abort,
            )
        except httpx.TimeoutException as exc:
            error: LLMError = LLMUnavailable(f"timed out after {backend.timeout:g}s ({exc.__class__.__name__})")
        except httpx.HTTPError as exc:
            error = LLMUnavailable(f"could not reach {backend.url}: {exc}")
        else:
            if response.status_code == 200:
                return Relay(response, model=str(body.get("model") or ""), started=started, stream=stream, abort=abort)
            raw = response.read()
            response.close()
            if response.status_code != 429 and response.status_code < 500:
                raise RelayRefused(response.status_code, raw, response.headers.get("content-type", ""))
            error = RelayRefused(response.status_code, raw, response.headers.get("content-type", ""))
            delay = _retry_after(response)
        if abort is not None and abort.aborted:
            raise LLMCancelled("stopped before the answer began")  # the client left: no retry, no back-off
        if attempt >= backend.max_retries:
            raise error
        backend._back_off(attempt, delay)
        attempt += 1


class Relay(AnswerStream):
    """The endpoint's answer, relayed byte for byte; `response` is set once it ended.

    Errors are not raised from the iterator (the caller already has the bytes that carried
    them): they end the relay with `error` set.
    """

    yields_bytes = True
    stops_at_done = False

    def __init__(
        self, http: httpx.Response, *, model: str, started: float, stream: bool, abort: StreamAbort | None = None
    ):
        self.stream = stream
        super().__init__(http, model=model, started=started, abort=abort)
        self.content_type = self.content_type or "application/json"

    def read(self) -> bytes:
        """Return the whole body (a non-streamed answer)."""
        return b"".join(self)
