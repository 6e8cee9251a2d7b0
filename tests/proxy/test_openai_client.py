"""The real `openai` Python client against the studio's live test server, the scripted
server as the studio's model: models, a streamed and a plain completion, stop strings,
an error the client raises, and the save the requests played."""

from __future__ import annotations

import openai
import pytest

from studio.api.services import api_token_create
from studio.world.models import Event

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_openai_client_plays_a_save(live_server, upstream, play_save, playtester):
    _, key = api_token_create(user=playtester, name="openai client")
    client = openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=key, max_retries=0, timeout=30)
    model = f"axiom/s/proxy-run--{play_save.save_id}/test-model"  # readable: the save's name, then its id
    assert model in [m.id for m in client.models.list().data]

    system = {"role": "system", "content": "You narrate a harbour story. {{axiom_memory}}"}
    first = client.chat.completions.create(
        model=model,
        messages=[system, {"role": "user", "content": "I ask about Kaël."}],
        stop=["\nYou:"],
        max_tokens=200,
    )
    answer = first.choices[0].message.content
    assert answer.startswith("Answer ") and first.choices[0].finish_reason == "stop"
    sent = upstream.relayed[-1]
    assert sent["stop"] == ["\nYou:"] and sent["max_tokens"] == 200 and sent["model"] == "test-model"

    stream = client.chat.completions.create(
        model=model,
        stream=True,
        messages=[
            system,
            {"role": "user", "content": "I ask about Kaël."},
            {"role": "assistant", "content": answer},
            {"role": "user", "content": "I walk to Port Vey."},
        ],
    )
    streamed = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert streamed.startswith("Answer ")
    play_save.refresh_from_db()
    assert play_save.current_turn == 1
    assert Event.objects.get(game_save=play_save, turn_id=1).narrative == answer

    with pytest.raises(openai.NotFoundError) as raised:
        client.chat.completions.create(model="axiom/nosuchsave/x", messages=[{"role": "user", "content": "hi"}])
    assert "nosuchsave" in str(raised.value)
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{live_server.url}/v1", api_key="wrong", max_retries=0).models.list()
