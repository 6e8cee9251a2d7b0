"""Ending a streamed request from another thread, at once, even before its first byte.

A reader that checks for a Stop between deltas waits for the next delta, and a model server
on a CPU may read a long prompt for half a minute before it sends anything (or stall
mid-answer). Closing the httpx response from another thread does not help: the thread
blocked in the socket read keeps waiting until the read timeout. Shutting the socket down
does: the blocked read fails at once and the server sees the reader leave.

- `StreamAbort` is the switch. Passed as `abort=` to `OpenAICompatibleBackend.stream`
  (through `TrackedLLM.stream`), the request goes on a connection of its own (never a pooled
  one, whose socket the caller cannot see) and the switch learns its socket through
  httpcore's `trace` extension when it connects. `abort()`, from any thread, shuts that socket down: a request
  still waiting for its answer raises `LLMCancelled` (never retried), an open answer
  (`streaming.AnswerStream`) ends "cancelled" instead of failing.
- `abort_when(stopped, every=...)` is the watcher: a thread that calls `stopped()` every
  `every` seconds while the block runs and flips the switch when it says True. Leaving the
  block stops the thread at once (it waits for no more than a `stopped()` in flight) and the
  thread closes the database connections it opened (Django's are per thread).
- `AbortWatch` is the same watcher for a span that is not one block (a view opens the
  request, a streamed response body reads it later): `start()`, then `stop()` from whoever
  ends it (idempotent; the body's end or its close). `api/disconnect.py` watches the HTTP
  client of a request this way.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import connections

logger = logging.getLogger(__name__)


class StreamAbort:
    """The switch that ends one streamed request from another thread (see the module docstring)."""

    def __init__(self):
        self.aborted = False
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []

    def trace(self, name: str, info: dict) -> None:
        """httpcore's `trace` request extension: keep the socket of each connection the request opens."""
        if name.endswith("connect_tcp.complete") and info.get("return_value") is not None:
            sock = info["return_value"].get_extra_info("socket")
            if sock is not None:
                with self._lock:
                    self._sockets.append(sock)
                    late = self.aborted
                if late:
                    _shut(sock)  # aborted while it connected

    def abort(self) -> None:
        """End the request: shut its socket down (a blocked read fails at once); later reads fail too."""
        with self._lock:
            self.aborted = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed: the request ended on its own


class AbortWatch:
    """Call `stopped()` every `every` seconds in a thread from `start()` to `stop()`; flip `abort` when it says True.

    A `stopped()` that raises (a database busy for a moment) is logged once and asked again
    at the next check; the stream never sees the error. After flipping the switch the
    thread ends. `stop()` ends the thread at once (it waits for no more than a `stopped()`
    in flight) and may be called any number of times, from any thread.
    """

    def __init__(self, stopped: Callable[[], bool], *, every: float, name: str = "llm-stream-stop-watch"):
        self.abort = StreamAbort()
        self._stopped = stopped
        self._every = every
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=name, daemon=True)

    def start(self) -> "AbortWatch":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._done.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def _watch(self) -> None:
        logged = False
        try:
            while not self._done.wait(self._every):
                try:
                    if self._stopped():
                        self.abort.abort()
                        return
                except Exception:  # noqa: BLE001 - the watcher must never break the stream it watches
                    if not logged:
                        logger.warning("stream stop check failed; asking again", exc_info=True)
                        logged = True
        finally:
            connections.close_all()  # this thread's connections only


@contextmanager
def abort_when(stopped: Callable[[], bool], *, every: float) -> Iterator[StreamAbort]:
    """Watch `stopped()` every `every` seconds in a thread while the block runs; yield the switch it flips.

    A `stopped()` that raises (a database busy for a moment) is logged once and asked again
    at the next check; the stream never sees the error.
    """
    watch = AbortWatch(stopped, every=every).start()
    try:
        yield watch.abort
    finally:
        watch.stop()
