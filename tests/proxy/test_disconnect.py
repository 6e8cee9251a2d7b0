"""A front end that leaves before the model's first token (its Stop, a closed tab): under gunicorn
(`gunicorn.socket` in the environ) the relay's upstream request ends at once, so a single-slot
local server is free for the next request.

The scripted upstream holds its answer back, before its headers (llama-cpp-python: opening the
relay blocks for the whole prompt read) or after them (llama.cpp's `llama-server`). The studio's
read timeout is a minute, so a request that ends within seconds was ended by the watch.
"""

from __future__ import annotations

import time

import httpx
import pytest

from studio.memory.llm.client import OpenAICompatibleBackend
from studio.memory.models import LLMCall
from studio.saves.models import NarratorAlternative
from tests.llm_server import Reply
from tests.plugins.client import held_back, watch_threads
from tests.proxy.frontends import sillytavern
from tests.proxy.player import sse_text

pytestmark = pytest.mark.django_db(transaction=True)

URL = "/v1/chat/completions"
PROMPTLY = 5.0  # seconds from the front end's leaving to the upstream request ending


@pytest.fixture
def slow_upstream(upstream, settings):
    """The upstream with a read timeout far beyond the test's patience; `release` frees a held answer."""
    with held_back(upstream, settings) as server:
        yield server


def post(proxy, play_save, environ=None, *, stream=True):
    body = sillytavern(f"axiom/{play_save.save_id}/test-model", [], "I wait.", stream=stream)
    return proxy.client.post(URL, body, content_type="application/json", headers=proxy._headers(), **(environ or {}))


def proposal(play_save) -> NarratorAlternative:
    return NarratorAlternative.objects.get(draft__game_save=play_save)


@pytest.mark.parametrize("stream", [True, False])
def test_a_front_end_that_leaves_while_the_relay_opens_ends_the_upstream_request(
    proxy, slow_upstream, play_save, gunicorn_client, stream
):
    slow_upstream.reply = Reply(content="too late", hold=slow_upstream.release)  # no headers before the first token
    gunicorn_client.leave_when(lambda: bool(slow_upstream.relayed))
    response = post(proxy, play_save, gunicorn_client.environ, stream=stream)
    assert response.status_code == 499
    assert time.monotonic() - gunicorn_client.left_at < PROMPTLY
    assert not stream or slow_upstream.server.disconnected.wait(5)  # the upstream saw its client leave
    assert not slow_upstream.release.is_set() and len(slow_upstream.relayed) == 1  # not retried
    alternative = proposal(play_save)
    assert alternative.status == "cancelled" and "left before the answer began" in alternative.error
    call = LLMCall.objects.get(game_save_id=play_save.pk, operation="proxy")
    assert "before the answer began" in call.error
    assert watch_threads() == []


def test_a_front_end_that_leaves_before_the_first_delta_ends_the_relay(
    proxy, slow_upstream, play_save, gunicorn_client
):
    slow_upstream.reply = Reply(content="one two three", chunk_delay=60)  # headers at once, the first word later
    response = post(proxy, play_save, gunicorn_client.environ)
    assert response.status_code == 200
    chunks = iter(response.streaming_content)
    assert next(chunks) == b": ping\r\n\r\n"  # the upstream's own bytes, nothing of the studio's
    assert len(watch_threads()) == 1
    gunicorn_client.leave()
    b"".join(chunks)  # would wait for the held word without the watch
    assert time.monotonic() - gunicorn_client.left_at < PROMPTLY
    assert slow_upstream.server.disconnected.wait(5)
    assert slow_upstream.server.settled_stream_log()[-1]["deltas_sent"] == 0
    assert proposal(play_save).status == "cancelled"
    call = LLMCall.objects.get(game_save_id=play_save.pk, operation="proxy")
    assert call.error.startswith("cancelled by the reader")
    assert watch_threads() == []


def test_a_front_end_that_stays_gets_the_upstream_bytes_unchanged(proxy, upstream, play_save, gunicorn_client):
    upstream.reply = Reply(content="The bell rings twice.", chunks=["The bell ", "rings twice."], chunk_delay=0.3)
    response = post(proxy, play_save, gunicorn_client.environ)
    chunks = iter(response.streaming_content)
    first = next(chunks)
    assert len(watch_threads()) == 1  # watched while it streams...
    through_proxy = first + b"".join(chunks)
    assert watch_threads() == []  # ...and no longer once the body ended
    relayed = {k: v for k, v in upstream.relayed[-1].items() if not k.startswith("_")}
    upstream.reply = Reply(content="The bell rings twice.", chunks=["The bell ", "rings twice."])
    direct = httpx.post(upstream.server.base_url + "/chat/completions", json=relayed).content
    assert through_proxy == direct and sse_text(through_proxy) == "The bell rings twice."
    assert proposal(play_save).status == "done"


def test_without_the_socket_nothing_is_watched(proxy, upstream, play_save, monkeypatch):
    # The backend is cached per configuration, so an earlier test on a reused port may have built
    # its abortable client already: count this request's uses of it instead of looking at it.
    abortable = []
    original = OpenAICompatibleBackend._abortable_client
    monkeypatch.setattr(
        OpenAICompatibleBackend, "_abortable_client", lambda self: abortable.append(1) or original(self)
    )
    upstream.reply = Reply(content="one two three", chunk_delay=0.1)
    response = post(proxy, play_save)
    chunks = iter(response.streaming_content)
    next(chunks)
    assert watch_threads() == []
    assert sse_text(b"".join(chunks)) == "one two three"
    assert abortable == []  # the pooled connection, as before
    assert proposal(play_save).status == "done"
