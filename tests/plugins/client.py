"""The HTTP client's connection as gunicorn hands it to a view, registered for the whole suite by
tests/conftest.py (`pytest_plugins`): the API's and the proxy's tests of a client that leaves.

`gunicorn_client` is one end of a `socket.socketpair()` standing for the studio's side of the
client's connection (put in the request's environ as `gunicorn.socket`, `environ`); closing the
other end (`leave()`) is the client going away: its Stop, a closed tab.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

WATCH_THREAD = "http-client-watch"  # the name of studio.api.disconnect's watch threads


def watch_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == WATCH_THREAD]


class ClientConnection:
    def __init__(self):
        self.server_end, self.client_end = socket.socketpair()
        self.left_at: float | None = None
        self._threads: list[threading.Thread] = []

    @property
    def environ(self) -> dict:
        """The WSGI environ entries gunicorn adds: a test client's `**extra`."""
        return {"gunicorn.socket": self.server_end}

    def leave(self) -> None:
        """The client goes away: it closes its side of the connection."""
        self.left_at = time.monotonic()
        self.client_end.close()

    def leave_when(self, ready: Callable[[], bool], timeout: float = 10) -> None:
        """Leave from another thread as soon as `ready()` says True (e.g. the model server has the request)."""

        def wait_and_leave():
            deadline = time.monotonic() + timeout
            while not ready() and time.monotonic() < deadline:
                time.sleep(0.02)
            self.leave()

        thread = threading.Thread(target=wait_and_leave, daemon=True)
        thread.start()
        self._threads.append(thread)

    def close(self) -> None:
        for thread in self._threads:
            thread.join(15)
        self.server_end.close()
        self.client_end.close()


@contextmanager
def held_back(server, settings) -> Iterator:
    """`server` (a scripted model server) with the studio's read timeout far beyond a test's patience,
    and `server.release`, an event that frees an answer the test holds back (set again at the end)."""
    settings.AXIOM_LLM_TIMEOUT = 60
    server.release = threading.Event()
    try:
        yield server
    finally:
        server.release.set()


@pytest.fixture
def gunicorn_client():
    connection = ClientConnection()
    yield connection
    connection.close()
