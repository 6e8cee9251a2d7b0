"""Noticing that the HTTP client of the current request has gone, before anything is written.

A WSGI application learns that its client left only when a write fails, and a streamed
answer writes nothing while a local model reads a long prompt (20-30 s on a CPU) or stalls.
Without a look at the socket the model server keeps working for a client that left (the
front end's Stop, a closed tab), and a single-slot local server (llama.cpp, Ollama) makes
the player's next request (a swipe, a regenerate) wait behind it.

- `client_gone(sock)`: True when the peer closed its side of the connection (a peek reads
  end-of-file, or the connection was reset), False while it is there (nothing to read yet,
  or bytes waiting), None when it cannot tell (no socket, a TLS socket, a platform without
  `MSG_DONTWAIT`, a socket this side already closed). It never consumes a byte and never
  blocks: it polls before it peeks (a socket with a timeout would wait inside `recv`).
- `client_socket(request)`: the client's socket where the server hands it to the
  application. gunicorn, the studio's server (Dockerfile, docker-compose.yml: sync
  workers), puts it in the WSGI environ as `gunicorn.socket`. Django's runserver
  (scripts/run.sh), the tests' live server and other servers give none: there nothing is
  watched and everything works as before (a client's leaving is noticed at the next write).
- `client_watch(request)`: an `AbortWatch` (memory/llm/abort.py) that peeks at that socket
  every `CLIENT_CHECK_SECONDS` and flips its `abort` switch when the client has gone (or
  this side closed the socket: the response is over); the caller passes `watch.abort` to
  the request it opens, so the model server sees its client leave at once, even before the
  first token. A watched request goes on a connection of its own (a new one to the model
  server each time, as the Console's narrations do: `llm/client.py`). None when there is no
  socket to watch: the caller then passes no abort and the request goes through the
  backend's pooled connections as before.
- `ClosingBody(body, *on_close)`: a streamed response's body that, when it ends or is
  closed (Django closes it when the response is done or the write to a gone client
  failed), closes `body` and runs `on_close` (the watch's `stop`), even when it was never
  iterated. It yields `body`'s items unchanged.
- `client_left()`: the answer to a request whose client left before it began (status
  499, nginx's "client closed request"); nobody reads it, the access log shows it.

Limits: a client that only half-closes (shuts its sending side and still reads) looks gone;
no HTTP client the studio knows does that mid-request. Behind a reverse proxy the socket is
the proxy's connection: the studio sees the proxy leave, which nginx does when its own
client leaves (`proxy_ignore_client_abort off`, its default).
"""

from __future__ import annotations

import select
import socket
import ssl
from collections.abc import Callable, Iterable, Iterator

from django.http import HttpRequest, HttpResponse

from studio.memory.llm import AbortWatch

CLIENT_CHECK_SECONDS = 0.5  # how often a watch peeks at the client's socket (one poll, no read)
CLIENT_CLOSED_REQUEST = 499
SERVER_SOCKET_KEYS = ("gunicorn.socket",)  # the WSGI environ keys that carry the client's socket


def client_gone(sock) -> bool | None:
    """Return True when the peer closed the connection, False while it is there, None when unknown."""
    if not isinstance(sock, socket.socket) or isinstance(sock, ssl.SSLSocket) or not hasattr(socket, "MSG_DONTWAIT"):
        return None
    try:
        poller = select.poll()  # not select.select: it refuses descriptors above 1,023
        poller.register(sock, select.POLLIN | select.POLLPRI)
        if not poller.poll(0):
            return False  # nothing to read and no hang-up: still there
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except (ConnectionResetError, ConnectionAbortedError, BrokenPipeError):
        return True
    except (OSError, ValueError):
        return None  # closed on this side (EBADF), or a socket that takes no flags


def client_socket(request: HttpRequest) -> socket.socket | None:
    """Return the socket of the request's client when the server hands it over and it can be peeked at."""
    for key in SERVER_SOCKET_KEYS:
        sock = request.META.get(key)
        if client_gone(sock) is not None:
            return sock
    return None


def client_watch(request: HttpRequest, *, every: float = CLIENT_CHECK_SECONDS) -> AbortWatch | None:
    """Start watching the request's client; return the watch (its `abort` to pass on), None when it cannot be watched."""
    sock = client_socket(request)
    if sock is None:
        return None
    return AbortWatch(lambda: client_gone(sock) is not False, every=every, name="http-client-watch").start()


class ClosingBody:
    """A streamed body that closes `body` and runs `on_close` once, when it ends or is closed."""

    def __init__(self, body: Iterable, *on_close: Callable[[], None] | None):
        self._body = body
        self._on_close = [callback for callback in on_close if callback is not None]
        self._closed = False

    def __iter__(self) -> Iterator:
        try:
            yield from self._body
        finally:
            self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            close = getattr(self._body, "close", None)
            if close is not None:
                close()
        finally:
            for callback in self._on_close:
                callback()


def client_left() -> HttpResponse:
    """Return the answer to a request whose client left before the answer began (nobody reads it)."""
    return HttpResponse(status=CLIENT_CLOSED_REQUEST, reason="Client Closed Request")
