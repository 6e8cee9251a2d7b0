"""POST /api/v1/saves/{save_id}/narrate as server-sent events: start, delta*, then done or error; nothing written."""

from __future__ import annotations

import pytest

from studio.memory.models import LLMCall
from tests.llm_server import Reply
from tests.plugins.narrator import STORY
from tests.support.event_streams import nothing_written, parse_events

pytestmark = pytest.mark.django_db


def narrate(api, game_save, body=None, headers=None):
    return api.post(
        f"/api/v1/saves/{game_save.save_id}/narrate",
        body or {"player_input": "I light a lamp", "stream": True},
        headers=headers,
    )


@pytest.mark.parametrize("ask", [{"stream": True}, {"accept": "text/event-stream"}])
def test_narrate_streams_events_and_appends_nothing(game_save, meta, narrator, api, ask):
    body = {"player_input": "I light a lamp", **({"stream": True} if "stream" in ask else {})}
    headers = {"Accept": ask["accept"]} if "accept" in ask else None
    response = narrate(api, game_save, body, headers)
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "text/event-stream" and response["Cache-Control"] == "no-cache"
    events = parse_events(b"".join(response.streaming_content).decode())
    names = [name for name, _ in events]
    assert names[0] == "start" and names[-1] == "done" and set(names[1:-1]) == {"delta"} and len(names) > 3
    assert events[0][1] == {
        "save_id": game_save.save_id,
        "turn_id": 4,
        "player_input": "I light a lamp",
        "model": events[0][1]["model"],
    }
    streamed = "".join(data["text"] for name, data in events if name == "delta")
    assert streamed.strip() == STORY
    done = events[-1][1]
    # The last event is the whole answer, as the non-streaming call gives it.
    assert done["narrative"] == STORY and done["turn_id"] == 4 and done["appended"] is False
    assert "Wren Halloway" in done["prompt"]["system"] and done["context"]["token_budget"] == 2000
    assert nothing_written(game_save)
    assert LLMCall.objects.filter(game_save=game_save, operation="narrate").count() == 1


@pytest.mark.parametrize("cut", [{"end_after": 3}, {"error_after": 3}])
def test_a_model_that_breaks_off_ends_with_an_error_event_and_writes_nothing(game_save, meta, narrator, api, cut):
    narrator.reply = Reply(content=STORY, **cut)
    response = narrate(api, game_save)
    assert response.status_code == 200
    events = parse_events(b"".join(response.streaming_content).decode())
    assert [n for n, _ in events][:4] == ["start", "delta", "delta", "delta"]
    name, data = events[-1]
    assert (
        name == "error"
        and data["error"]["code"] == "llm_failed"
        and set(data["error"]) == {"code", "message", "details"}
    )
    assert "done" not in [n for n, _ in events]
    assert nothing_written(game_save)


def test_a_client_that_disconnects_stops_the_model_and_writes_nothing(game_save, meta, narrator, api):
    narrator.reply = Reply(content=STORY, chunk_delay=0.05)
    response = narrate(api, game_save)
    chunks = iter(response.streaming_content)
    assert next(chunks).startswith(b"event: start")
    assert next(chunks).startswith(b"event: delta")
    # The client goes away: the server stops reading the body and closes its iterator (here the
    # test client's wrapper around the view's generator, which closes the generator in turn).
    response._iterator.close()
    assert narrator.server.disconnected.wait(5)  # the model's stream was closed too
    assert nothing_written(game_save)
    call = LLMCall.objects.get(game_save=game_save, operation="narrate")
    assert "cancelled" in call.error


def test_stream_errors_before_the_first_byte_are_plain_json(game_save, api, narrator, settings):
    settings.AXIOM_LLM_CALLS_PER_HOUR = 1
    LLMCall.objects.create(game_save=game_save, operation="extract", model="test-model")
    response = narrate(api, game_save)
    assert response.status_code == 429 and response.json()["error"]["code"] == "spend_limit"
    settings.AXIOM_LLM_BASE_URL = ""
    response = narrate(api, game_save)
    assert response.status_code == 503 and response.json()["error"]["code"] == "no_model"
    bad = narrate(api, game_save, {"player_input": "I light a lamp", "stream": "yes"})
    assert bad.status_code == 400 and set(bad.json()["error"]["details"]) == {"stream"}
    assert nothing_written(game_save)


def test_the_stream_is_documented(api):
    document = api.get("/api/v1/openapi.json").json()
    content = document["paths"]["/saves/{save_id}/narrate"]["post"]["responses"]["200"]["content"]
    assert {"application/json", "text/event-stream"} <= set(content)
