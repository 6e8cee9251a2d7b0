"""Reading an open chat-completions answer as it arrives: the one base of `ChatStream` and `Relay`.

Both the client's own streamed calls (`client.ChatStream`, an iterator of text deltas) and
the memory proxy's relays (`relay.Relay`, an iterator of the endpoint's raw bytes) read the
same answer format the same way; only what their iterator hands out differs. This base holds
what they share:

- Reading: server-sent events (a `text/event-stream` answer, `SSEParser`) or one JSON
  document (a server that ignored `stream: true`, or a caller that did not ask for a
  stream). From each chunk's data it reads choice 0's text, the finish reason, usage and
  model, so `text` grows as the answer passes and `response` (an `LLMResponse`) holds it all
  once it ended. An `error` event, a body that ends without a finish reason or `[DONE]`, a
  broken or stalled connection and malformed data end the answer with `error` set and
  finish reason "error".
- Ending: `close()` before the end closes the HTTP connection (how a server learns that the
  reader went away and stops generating) and ends the answer "cancelled". Leaving a `with`
  block closes it too. `on_finish(answer)` callbacks run exactly once, at the end, on error
  or on close; a failing callback is logged and never breaks the reader. A relay's
  `on_first(answer)` callbacks run once after its first chunk was handed on (work that need
  not delay the first byte), unless the answer ended first.
- Aborting: a read that fails because another thread flipped the answer's `abort`
  (`abort.StreamAbort`, which shuts the socket down) ends the answer "cancelled", as
  `close()` does, never with an error.

A subclass says what its iterator yields (`yields_bytes`: the raw body, errors left in
`error`; or text deltas, an error raised at the end), whether reading stops at `[DONE]`
(`stops_at_done`) and how it builds its response.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator

import httpx

from studio.memory.llm.abort import StreamAbort
from studio.memory.llm.base import LLMError, LLMResponse, LLMUnavailable, estimate_tokens

logger = logging.getLogger(__name__)


class SSEParser:
    """Server-sent events from byte chunks: each event's JSON data, None for `data: [DONE]`.

    Data lines are joined until the blank line that ends their event; "event:", "id:",
    "retry:" and ":" comment lines carry nothing a chat completion needs. Nothing after
    `[DONE]` is read. Malformed JSON raises ValueError.
    """

    def __init__(self):
        self._pending = b""
        self._data: list[str] = []
        self.done = False

    def feed(self, chunk: bytes) -> list:
        """Return the events that `chunk` completed."""
        self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        return [event for line in lines for event in self._line(line)]

    def end(self) -> list:
        """Return the events left when the body ended (a last event without its blank line)."""
        events = self._line(self._pending) if self._pending else []
        self._pending = b""
        return events + (self._dispatch() if not self.done else [])

    def _line(self, raw: bytes) -> list:
        if self.done:
            return []
        line = raw.decode("utf-8", "replace").rstrip("\r")
        if line.startswith("data:"):
            self._data.append(line[5:].lstrip(" "))
            return []
        return self._dispatch() if not line.strip() else []

    def _dispatch(self) -> list:
        if not self._data:
            return []
        payload = "\n".join(self._data).strip()
        self._data = []
        if payload == "[DONE]":
            self.done = True
            return [None]
        return [json.loads(payload)] if payload else []


class AnswerStream:
    """One chat-completions answer read as it arrives; `response` is set once it ended."""

    yields_bytes = False  # True: the iterator yields the raw chunks; False: the text deltas
    stops_at_done = True  # stop reading at `[DONE]` (a relay reads the body to its end)

    def __init__(self, http: httpx.Response, *, model: str, started: float, abort: StreamAbort | None = None):
        self._http = http
        self._abort = abort
        self.model = model
        self.started = started
        self.content_type = http.headers.get("content-type", "")
        self.response: LLMResponse | None = None
        self.error: LLMError | None = None
        self.cancelled = False
        self.on_finish: list[Callable] = []
        # A relay's: run once, after its first chunk was handed on (when the reader asks for the next one); a
        # reader that leaves after one chunk ends the answer first (`on_finish` runs, these never do).
        self.on_first: list[Callable] = []
        self._first_handed = False
        self._parts: list[str] = []
        self._finish_reason = ""
        self._usage: dict = {}
        self._first_ms: int | None = None
        self._finished = False
        self._gen = self._items()

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._gen)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop reading: close the HTTP connection (the server sees the reader leave)."""
        if self._finished:
            return
        self.cancelled = True
        self._gen.close()
        self._http.close()
        self._finish("cancelled")

    # -- what subclasses may override ----------------------------------------------------------

    def _items(self) -> Iterator:
        """Yield what the iterator hands out: the raw chunks (a relay: the body as sent, its errors
        left in `error`, the caller having the bytes that carried them) or the decoded text deltas
        (an error then raised once the stream has finished: a text reader sees it no other way)."""
        if self.yields_bytes:
            yield from self._read(self._http.iter_raw())
            return
        yield from self._read(self._http.iter_bytes())
        if self.error is not None:
            raise self.error

    def _response(self, finish_reason: str) -> LLMResponse:
        """Return the whole answer, from what was read (`text`, `model`, usage, timings)."""
        usage = self._usage
        text = self.text
        return LLMResponse(
            text=text,
            model=self.model,
            prompt_tokens=_int(usage.get("prompt_tokens")),
            completion_tokens=_int(usage.get("completion_tokens")) if usage else estimate_tokens(text),
            latency_ms=int((time.monotonic() - self.started) * 1000),
            estimated_tokens=not usage,
            finish_reason=finish_reason,
            first_token_ms=self._first_ms,
        )

    def _read_document(self, data) -> str:
        """Read a whole JSON answer; return its text."""
        return self._read_data(data) if isinstance(data, dict) else ""

    # -- reading ------------------------------------------------------------------------------

    def _read(self, chunks: Iterable[bytes]) -> Iterator[bytes | str]:
        """Read the body's chunks to the end; yield each chunk or each text delta; then finish the answer.

        A relay reads each streamed chunk before it hands it on, so a reader that leaves right
        after a chunk (a front end's Stop) finds its text in `text`; a chunk that carries an
        error is still handed on before the error ends the relay.
        """
        parser = SSEParser() if "text/event-stream" in self.content_type else None
        body = b""
        try:
            for chunk in chunks:
                if not chunk:
                    continue
                if parser is None:
                    if self.yields_bytes:
                        self._mark_first()
                        yield chunk
                        self._handed_first()
                    body += chunk
                    continue
                if not self.yields_bytes:
                    yield from self._deltas(parser.feed(chunk))
                else:
                    self._mark_first()
                    try:
                        list(self._deltas(parser.feed(chunk)))  # fills `text`; a relay's deltas yield nothing
                    except Exception:
                        yield chunk  # the bytes that carried the error reach the caller too
                        raise
                    yield chunk
                    self._handed_first()
                if parser.done and self.stops_at_done:
                    break
            if parser is None:
                yield from self._deltas([self._read_document(json.loads(body or b"{}"))], read=True)
            else:
                yield from self._deltas(parser.end())
                if not parser.done and not self._finish_reason:
                    # The connection closed without a finish reason or [DONE]: the server (or a
                    # proxy) gave up mid-answer; the text so far may be half a sentence.
                    raise LLMUnavailable(f"the stream ended unfinished after {len(self.text)} characters")
        except httpx.TimeoutException as exc:
            self.error = LLMUnavailable(
                f"the stream stalled ({exc.__class__.__name__}) after {len(self.text)} characters"
            )
        except httpx.HTTPError as exc:
            self.error = LLMUnavailable(f"the stream broke after {len(self.text)} characters: {exc}")
        except LLMError as exc:
            self.error = exc
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            self.error = LLMUnavailable(f"malformed answer: {exc}")
        finally:
            if not self.cancelled:
                self._http.close()
        if self.error is not None and self._abort is not None and self._abort.aborted:
            self.error, self.cancelled = None, True  # another thread's Stop, not a broken answer
        self._finish("cancelled" if self.cancelled else "error" if self.error is not None else self._finish_reason)

    def _deltas(self, events: list, *, read: bool = False) -> Iterator[str]:
        """Read each event (`read`: already read, they are texts); yield its text when it has any
        and the iterator yields text."""
        for event in events:
            if event is None:
                continue  # [DONE]
            text = event if read else self._read_event(event)
            if text and not self.yields_bytes:
                yield text

    def _read_event(self, data) -> str:
        if not isinstance(data, dict):
            return ""
        if isinstance(data.get("error"), (dict, str)):
            raise LLMUnavailable(f"the endpoint reported an error mid-stream: {str(data['error'])[:300]}")
        return self._read_data(data)

    def _read_data(self, data: dict) -> str:
        """Read one chunk (or a whole answer): model, usage, choice 0's text and finish reason."""
        if data.get("model"):
            self.model = str(data["model"])
        if isinstance(data.get("usage"), dict) and data["usage"]:
            self._usage = data["usage"]
        read = ""
        for choice in data.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            part = choice.get("delta") or choice.get("message") or {}
            text = part.get("content") if isinstance(part, dict) else None
            if text:
                self._mark_first()
                self._parts.append(str(text))
                read += str(text)
            if choice.get("finish_reason"):
                self._finish_reason = str(choice["finish_reason"])
        return read

    def _handed_first(self) -> None:
        if self._first_handed:
            return
        self._first_handed = True
        for callback in self.on_first:
            try:
                callback(self)
            except Exception:  # noqa: BLE001 - a hook must not break the reader
                logger.exception("%s on_first callback failed", type(self).__name__)

    def _mark_first(self) -> None:
        if self._first_ms is None:
            self._first_ms = int((time.monotonic() - self.started) * 1000)

    def _finish(self, finish_reason: str) -> None:
        if self._finished:
            return
        self._finished = True
        self.response = self._response(finish_reason)
        for callback in self.on_finish:
            try:
                callback(self)
            except Exception:  # noqa: BLE001 - a logging hook must not break the reader
                logger.exception("%s on_finish callback failed", type(self).__name__)


def _int(value) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0
