"""Bad bodies are 400 in the OpenAI shape, naming the field: nothing written, nothing sent upstream,
no call logged. Before, NaN reached the upstream server (502 "Out of range float values") after
the save was synced and a failed proposal and a call-log row were written."""

from __future__ import annotations

import pytest

from studio.memory.models import LLMCall
from studio.saves.models import NarratorAlternative, NarratorDraft
from studio.world.models import Event
from tests.proxy.player import Player

pytestmark = pytest.mark.django_db

URL = "/v1/chat/completions"


def body_text(model, **fields):
    """A raw body: `fields` are JSON texts put in as they are (NaN, duplicate keys)."""
    parts = [f'"model": "{model}"', '"messages": [{"role": "user", "content": "I wait."}]']
    parts += [f'"{name}": {text}' for name, text in fields.items()]
    return "{" + ", ".join(parts) + "}"


def refused(proxy, upstream, play_save, raw: str, code: str, param=None):
    before = len(upstream.relayed)
    response = proxy.post(URL, raw=raw)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == code and error["type"] == "invalid_request_error", error
    if param is not None:
        assert error["param"] == param, error
    assert len(upstream.relayed) == before, "a refused body reached the model"
    assert not NarratorAlternative.objects.filter(draft__game_save=play_save).exists()
    assert not LLMCall.objects.filter(game_save=play_save).exists()
    return error["message"]


@pytest.mark.parametrize(
    "name, text",
    [
        ("temperature", "NaN"),
        ("temperature", "Infinity"),
        ("top_p", "-Infinity"),
        ("temperature", "1e400"),
    ],
)
def test_numbers_json_cannot_carry_are_refused(proxy, upstream, play_save, name, text):
    model = f"axiom/{play_save.save_id}/test-model"
    message = refused(proxy, upstream, play_save, body_text(model, **{name: text}), "invalid_json")
    assert "JSON number" in message or "infinity" in message


def test_a_key_twice_is_refused(proxy, upstream, play_save):
    model = f"axiom/{play_save.save_id}/test-model"
    raw = body_text(model, temperature="0.5").replace('"temperature"', '"top_p": 1, "top_p"')
    assert "appears twice" in refused(proxy, upstream, play_save, raw, "invalid_json")


@pytest.mark.parametrize(
    "name, text, code",
    [
        ("temperature", "true", "invalid_type"),
        ("top_p", '"1"', "invalid_type"),
        ("n", "1.5", "invalid_type"),
        ("max_tokens", "0", "invalid_value"),
        ("temperature", "2.5", "invalid_value"),
        ("stream", '"yes"', "invalid_type"),
        ("stop", "[1, 2]", "invalid_type"),
        ("logit_bias", '{"50256": "x"}', "invalid_value"),
        ("axiom_memory_tokens", '"600"', "invalid_type"),
    ],
)
def test_wrong_types_and_ranges_are_refused_naming_the_field(proxy, upstream, play_save, name, text, code):
    model = f"axiom/{play_save.save_id}/test-model"
    message = refused(
        proxy,
        upstream,
        play_save,
        body_text(model, **{name: text}),
        code,
        param=name if name != "logit_bias" else "logit_bias.50256",
    )
    assert name in message


@pytest.mark.parametrize(
    "messages, param",
    [
        ('[{"role": "narrator", "content": "x"}]', "messages[0].role"),
        ('[{"role": "user", "content": 5}]', "messages[0].content"),
        ('[{"role": "user", "content": [{"text": "no type"}]}]', "messages[0].content[0]"),
        ('[{"role": "user", "content": "x", "name": 7}]', "messages[0].name"),
        ('[{"role": "user", "content": "I say \\u0000."}]', "messages[0].content"),
    ],
)
def test_bad_messages_are_refused_naming_the_message(proxy, upstream, play_save, messages, param):
    raw = f'{{"model": "axiom/{play_save.save_id}/test-model", "messages": {messages}}}'
    refused(proxy, upstream, play_save, raw, "invalid_messages", param=param)


def test_a_message_its_turn_could_not_store_is_refused_and_the_save_kept(proxy, upstream, play_save):
    """A 4 MiB user message was stored whole, and the save's export then failed to import."""
    player = Player(proxy, play_save)
    player.say("I look around.")
    player.say("I wait.")
    turns = list(Event.objects.filter(game_save=play_save).values_list("turn_id", "narrative"))
    drafts = NarratorDraft.objects.filter(game_save=play_save).count()
    relayed = len(upstream.relayed)
    too_long = "x" * 20_001
    messages = player.messages(player.settled, too_long)
    response = proxy.post(URL, {"model": f"axiom/{play_save.save_id}/test-model", "messages": messages})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_messages" and error["param"] == f"messages[{len(messages) - 1}].content"
    assert "20,000" in error["message"] and "turn.player_input" in error["message"]
    # An edited earlier answer over the narration's limit: refused before any rewind.
    long_answer = [(player.chat[0][0], "y" * 200_001)]
    response = proxy.post(
        URL, {"model": f"axiom/{play_save.save_id}/test-model", "messages": player.messages(long_answer, "On.")}
    )
    assert response.status_code == 400 and "200,000" in response.json()["error"]["message"]
    assert list(Event.objects.filter(game_save=play_save).values_list("turn_id", "narrative")) == turns
    assert NarratorDraft.objects.filter(game_save=play_save).count() == drafts and len(upstream.relayed) == relayed


def test_a_system_message_with_nul_is_refused_too(proxy, upstream, play_save):
    """The prompt is kept with its turn (the narrator snapshot): what no database stores is refused anywhere."""
    raw = (
        f'{{"model": "axiom/{play_save.save_id}/test-model", "messages": [{{"role": "system", "content": "a\\u0000"}}, '
        '{"role": "user", "content": "Hi."}]}'
    )
    refused(proxy, upstream, play_save, raw, "invalid_messages", param="messages[0].content")
