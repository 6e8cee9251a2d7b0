"""`studio.api.disconnect`: telling that a request's client has gone, from its socket, without reading from it."""

from __future__ import annotations

import socket
import struct
import time

from django.test import RequestFactory

from studio.api.disconnect import ClosingBody, client_gone, client_socket, client_watch
from tests.plugins.client import watch_threads


def test_a_connected_client_is_there_and_its_pending_bytes_are_left_alone():
    ours, theirs = socket.socketpair()
    try:
        assert client_gone(ours) is False
        theirs.sendall(b"GET")
        assert client_gone(ours) is False  # bytes waiting: still there
        assert ours.recv(10) == b"GET"  # the peek consumed nothing
    finally:
        ours.close()
        theirs.close()


def test_a_client_that_closed_its_side_is_gone():
    ours, theirs = socket.socketpair()
    theirs.close()
    try:
        assert client_gone(ours) is True
        assert client_gone(ours) is True  # asking again reads nothing either
    finally:
        ours.close()


def test_a_reset_connection_is_gone():
    listener = socket.create_server(("127.0.0.1", 0))
    theirs = socket.create_connection(listener.getsockname())
    ours, _ = listener.accept()
    try:
        ours.sendall(b"event: start\n\n")  # unread by the client: its close resets the connection
        theirs.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        theirs.close()
        deadline = time.monotonic() + 5
        while client_gone(ours) is not True and time.monotonic() < deadline:
            time.sleep(0.01)
        assert client_gone(ours) is True
    finally:
        ours.close()
        listener.close()


def test_a_socket_with_a_timeout_is_never_waited_on():
    ours, theirs = socket.socketpair()
    ours.settimeout(5)
    try:
        started = time.monotonic()
        assert client_gone(ours) is False
        assert time.monotonic() - started < 1
    finally:
        ours.close()
        theirs.close()


def test_without_a_usable_socket_it_cannot_tell():
    ours, theirs = socket.socketpair()
    ours.close()
    theirs.close()
    assert client_gone(ours) is None  # this side closed it
    assert client_gone(None) is None
    assert client_gone("not a socket") is None


def test_only_a_server_that_hands_over_the_socket_is_watched():
    factory = RequestFactory()
    assert client_socket(factory.get("/")) is None  # runserver, the test client: nothing to watch
    assert client_watch(factory.get("/")) is None
    ours, theirs = socket.socketpair()
    try:
        request = factory.get("/", **{"gunicorn.socket": ours})
        assert client_socket(request) is ours
        watch = client_watch(request, every=0.02)
        assert watch is not None and len(watch_threads()) == 1
        time.sleep(0.1)
        assert not watch.abort.aborted  # the client is there
        theirs.close()
        deadline = time.monotonic() + 5
        while not watch.abort.aborted and time.monotonic() < deadline:
            time.sleep(0.01)
        assert watch.abort.aborted
        watch.stop()
        watch.stop()  # idempotent
        assert watch_threads() == []
    finally:
        ours.close()
        theirs.close()


def test_a_closing_body_yields_unchanged_and_closes_once_even_unread():
    closed = []

    class Body:
        def __iter__(self):
            return iter([b"a", b"b"])

        def close(self):
            closed.append("body")

    body = ClosingBody(Body(), lambda: closed.append("watch"), None)
    assert list(body) == [b"a", b"b"] and closed == ["body", "watch"]
    body.close()
    assert closed == ["body", "watch"]

    unread = ClosingBody(Body(), lambda: closed.append("unread watch"))
    unread.close()  # Django closes a response that was never read
    assert closed[-2:] == ["body", "unread watch"]
