"""A streamed narration whose client leaves before the model's first token (the front end's Stop, a
closed tab): under gunicorn (`gunicorn.socket` in the environ) the model's request ends at once.

The scripted server holds its answer back as a CPU model server reading a long prompt does:
either before its headers (llama-cpp-python) or after them (llama.cpp's `llama-server`). The
studio's read timeout is a minute, so a request that ends within seconds was ended by the watch.
"""

from __future__ import annotations

import json
import time

import pytest

from studio.memory.llm import get_llm_backend
from studio.memory.models import LLMCall
from tests.llm_server import Reply
from tests.plugins.client import held_back, watch_threads
from tests.plugins.narrator import STORY
from tests.support.event_streams import nothing_written, parse_events

pytestmark = pytest.mark.django_db

PROMPTLY = 5.0  # seconds from the client's leaving to the model's request ending (the watch peeks every 0.5 s)


@pytest.fixture
def slow_model(narrator, settings):
    """The narrator with a read timeout far beyond the test's patience; `release` frees a held answer."""
    with held_back(narrator, settings) as server:
        yield server


def narrate(api, game_save, environ=None):
    body = json.dumps({"player_input": "I light a lamp", "stream": True})
    return api.client.post(
        f"/api/v1/saves/{game_save.save_id}/narrate",
        body,
        content_type="application/json",
        headers=api._headers(),
        **(environ or {}),
    )


def test_a_client_that_leaves_while_the_model_reads_the_prompt_ends_the_request(
    game_save, meta, api, slow_model, gunicorn_client
):
    slow_model.reply = Reply(content=STORY, hold=slow_model.release)  # no headers until the first token
    gunicorn_client.leave_when(lambda: bool(slow_model.server.requests_for("narrate")))
    response = narrate(api, game_save, gunicorn_client.environ)
    ended = time.monotonic()
    assert response.status_code == 499  # nobody reads it: the access log's "client closed request"
    assert ended - gunicorn_client.left_at < PROMPTLY
    assert slow_model.server.disconnected.wait(5)  # the model server saw its client leave
    assert slow_model.server.stream_log == [{"deltas_sent": 0, "disconnected": True, "completed": False}]
    assert not slow_model.release.is_set()
    assert len(slow_model.server.requests_for("narrate")) == 1  # a client that left is not retried
    call = LLMCall.objects.get(game_save=game_save, operation="narrate")
    assert "before the answer began" in call.error  # as the Console's Stop before the first byte
    assert nothing_written(game_save)
    assert watch_threads() == []


def test_a_client_that_leaves_before_the_first_delta_ends_the_stream_without_done(
    game_save, meta, api, slow_model, gunicorn_client
):
    slow_model.reply = Reply(content=STORY, chunk_delay=60)  # headers at once, the first word a minute later
    response = narrate(api, game_save, gunicorn_client.environ)
    assert response.status_code == 200
    chunks = iter(response.streaming_content)
    assert next(chunks).startswith(b"event: start")
    assert len(watch_threads()) == 1  # watching while the model is silent
    gunicorn_client.leave()
    rest = b"".join(chunks)  # would wait for the held word without the watch
    assert time.monotonic() - gunicorn_client.left_at < PROMPTLY
    assert rest == b""  # no delta and no `done`: nothing recorded as a narration
    assert slow_model.server.disconnected.wait(5)
    assert slow_model.server.settled_stream_log() == [{"deltas_sent": 0, "disconnected": True, "completed": False}]
    call = LLMCall.objects.get(game_save=game_save, operation="narrate")
    assert call.error == "cancelled by the reader after 0 characters"  # as the Console's Stop mid-stream
    assert nothing_written(game_save)
    assert watch_threads() == []


def test_a_client_that_stays_gets_the_whole_stream(game_save, meta, api, narrator, gunicorn_client):
    narrator.reply = Reply(content=STORY, chunk_delay=0.15)  # long enough for the watch to peek meanwhile
    response = narrate(api, game_save, gunicorn_client.environ)
    chunks = iter(response.streaming_content)
    first = next(chunks)
    assert len(watch_threads()) == 1
    events = parse_events((first + b"".join(chunks)).decode())
    assert events[-1][0] == "done" and events[-1][1]["narrative"] == STORY
    assert LLMCall.objects.get(game_save=game_save, operation="narrate").error == ""
    assert watch_threads() == []  # the body's end stopped the watch


@pytest.mark.django_db(transaction=True)  # closing the response ends the request: its connection closes
def test_a_body_closed_unread_stops_the_watch_and_the_model(game_save, meta, api, narrator, gunicorn_client):
    narrator.reply = Reply(content=STORY, chunk_delay=0.5)
    response = narrate(api, game_save, gunicorn_client.environ)
    assert len(watch_threads()) == 1
    response.close()  # what the server does when it never gets to write
    assert watch_threads() == []
    assert narrator.server.disconnected.wait(5)
    assert "cancelled" in LLMCall.objects.get(game_save=game_save, operation="narrate").error


def test_without_the_socket_nothing_is_watched(game_save, meta, api, narrator):
    response = narrate(api, game_save)
    chunks = iter(response.streaming_content)
    next(chunks)
    assert watch_threads() == []
    events = parse_events(b"".join(chunks).decode())
    assert events[-1][0] == "done"
    assert get_llm_backend()._own_client is None  # the pooled connection, as before: no abortable request
