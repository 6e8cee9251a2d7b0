"""What a front end is told when a proxy request cannot be served: the OpenAI error shape,
and nothing written."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from studio.saves.models import NarratorAlternative
from studio.world.models import Event
from tests.llm_server import Reply
from tests.proxy.frontends import sillytavern
from tests.proxy.player import Player

pytestmark = pytest.mark.django_db

URL = "/v1/chat/completions"


def code(response):
    return response.json()["error"]["code"]


def test_a_key_is_required(make_api, upstream, play_save):
    body = sillytavern(f"axiom/{play_save.save_id}", [], "Hi.")
    for api in (make_api(None), type(make_api(None))("axm_not-a-real-key")):
        response = api.post(URL, body)
        assert response.status_code == 401 and code(response) == "invalid_api_key"
        assert api.get("/v1/models").status_code == 401
    assert not NarratorAlternative.objects.exists()


def test_bad_requests_say_what_is_wrong(proxy, upstream, play_save):
    assert code(proxy.post(URL, raw="{not json")) == "invalid_json"
    response = proxy.post(URL, {"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]})
    assert (
        response.status_code == 400
        and code(response) == "model_not_found"
        and "axiom/u/<universe>" in response.json()["error"]["message"]
    )
    response = proxy.post(URL, {"model": f"axiom/{play_save.save_id}", "messages": "hello"})
    assert response.status_code == 400 and code(response) == "invalid_messages"
    assert proxy.get(URL).status_code == 405


def test_a_save_the_key_may_not_play(make_api, upstream, play_save, universe, outsider):
    body = sillytavern(f"axiom/{play_save.save_id}", [], "Hi.")
    assert make_api(outsider).post(URL, body).status_code == 404
    member = User.objects.create_user("member", password="pw")
    universe.members.add(member)
    response = make_api(member).post(URL, body)
    assert response.status_code == 403 and code(response) == "permission_denied"
    assert make_api(member).get("/v1/models").json()["data"] == []


def test_models_lists_a_model_name_per_universe_and_per_playable_save(proxy, upstream, play_save, game_save):
    """The ids read as what they play (SillyTavern shows only the ids): the universe, the save's name."""
    ids = [entry["id"] for entry in proxy.get("/v1/models").json()["data"]]
    assert ids[0] == "axiom/u/test-world/test-model"  # a save per chat
    assert (
        f"axiom/s/proxy-run--{play_save.save_id}/test-model" in ids
        and f"axiom/s/run-1--{game_save.save_id}/test-model" in ids
    )


def test_another_chat_is_not_bound_to_a_save_with_turns(proxy, upstream, game_save):
    before = list(Event.objects.filter(game_save=game_save).values_list("turn_id", "narrative"))
    response = proxy.post(URL, sillytavern(f"axiom/{game_save.save_id}", [("Hello.", "Hi.")], "Bye."))
    assert response.status_code == 409 and code(response) == "history_conflict"
    assert list(Event.objects.filter(game_save=game_save).values_list("turn_id", "narrative")) == before


def test_upstream_failures(proxy, upstream, play_save, settings):
    body = sillytavern(f"axiom/{play_save.save_id}", [], "Hi.", stream=False)
    upstream.reply = Reply(status=400, raw_body='{"error": {"message": "context length exceeded"}}')
    response = proxy.post(URL, body)
    assert response.status_code == 400 and b"context length exceeded" in response.content  # the endpoint's own
    upstream.reply = Reply(status=503)
    response = proxy.post(URL, body)
    assert response.status_code == 503  # retried, then passed back
    settings.AXIOM_LLM_BASE_URL = "http://127.0.0.1:9"
    response = proxy.post(URL, body)
    assert response.status_code == 502 and code(response) == "upstream_unavailable"
    assert set(NarratorAlternative.objects.values_list("status", flat=True)) == {"failed"}
    settings.AXIOM_LLM_BASE_URL = ""
    assert proxy.post(URL, body).status_code == 503


def test_the_spend_guard_pauses_a_save(proxy, upstream, play_save, settings):
    settings.AXIOM_LLM_CALLS_PER_HOUR = 1
    player = Player(proxy, play_save)
    player.say("One.")
    response = proxy.post(URL, sillytavern(f"axiom/{play_save.save_id}", [], "Two.", stream=False))
    assert response.status_code == 429 and code(response) == "spend_limit"


def test_a_memory_store_that_is_down_is_a_503(proxy, upstream, play_save, monkeypatch):
    from studio.memory.vector import VectorStoreError

    def down(**kwargs):
        raise VectorStoreError("chroma is down")

    monkeypatch.setattr("studio.proxy.services.next_turn_context", down)
    response = proxy.post(URL, sillytavern(f"axiom/{play_save.save_id}", [], "Hi.", stream=False))
    assert response.status_code == 503 and code(response) == "memory_unavailable"


def test_a_chat_deleted_back_to_a_new_first_message_is_refused(proxy, upstream, play_save):
    from tests.proxy.player import Player

    player = Player(proxy, play_save)
    player.say("One.")
    player.say("Two.")
    response = proxy.post(URL, {"model": f"axiom/{play_save.save_id}", "messages": player.messages([], "A new start.")})
    assert response.status_code == 409 and "new save" in response.json()["error"]["message"]
    # Deleted back to the first message and asked again (a swipe of the first answer): turn 1 goes.
    response = proxy.post(URL, {"model": f"axiom/{play_save.save_id}", "messages": player.messages([], "One.")})
    assert response.status_code == 200
    play_save.refresh_from_db()
    assert play_save.current_turn == 0
