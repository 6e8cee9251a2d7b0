"""Two tabs on one save at once, against the live server, through the real `openai` client
with its default retries (2, on 409 and 5xx): tab A sends its next message (settling the
pending answer of turn 4), tab B resends the chat with an earlier answer edited. Every round:
no 500, one request wins and the other gets 409 (or both went through one after the other),
and the save equals one of the two chats; a retried request never re-applies its chat over
the winner's."""

from __future__ import annotations

import threading

import openai
import pytest
from django.db import connections

from studio.api.services import api_token_create
from studio.saves.models import DraftStatus, NarratorDraft
from studio.world.models import Event

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 20
SYSTEM = {"role": "system", "content": "You narrate a harbour story. {{axiom_memory}}"}
BASE = [(f"I do thing {n}.", f"Thing {n} happens.") for n in (1, 2, 3)]


def messages(turns, pending):
    out = [SYSTEM]
    for player_input, answer in turns:
        out += [{"role": "user", "content": player_input}, {"role": "assistant", "content": answer}]
    return out + [{"role": "user", "content": pending}]


def save_chat(game_save):
    """The save as a chat: its settled turns and the input its open draft waits on."""
    turns = list(Event.objects.filter(game_save=game_save).order_by("turn_id").values_list("player_input", "narrative"))
    draft = NarratorDraft.objects.filter(game_save=game_save, status=DraftStatus.OPEN).order_by("-id").first()
    return turns, draft.player_input if draft else None


def test_a_new_message_and_an_earlier_edit_at_once(live_server, upstream, play_save, playtester):
    _, key = api_token_create(user=playtester, name="two tabs")
    model = f"axiom/{play_save.save_id}/test-model"

    seen = []  # every status the server answered, retries included

    def client():
        hooks = {"response": [lambda response: seen.append(response.status_code)]}
        return openai.OpenAI(
            base_url=f"{live_server.url}/v1",
            api_key=key,
            timeout=30,  # default retries
            http_client=openai.DefaultHttpxClient(event_hooks=hooks),
        )

    setup = client()
    for index, (player_input, _) in enumerate(BASE):
        setup.chat.completions.create(model=model, messages=messages(BASE[:index], player_input))
    outcomes = []
    for round_number in range(ROUNDS):
        # The base: turns 1-3 settled, turn 4 asked for (its answer is the pending proposal).
        answer = (
            setup.chat.completions.create(model=model, messages=messages(BASE, "I ask about the ledger."))
            .choices[0]
            .message.content
        )
        edited = BASE[:1] + [(BASE[1][0], f"Round {round_number}: the harbour master laughs instead.")] + BASE[2:]
        chats = {
            "A": (BASE + [("I ask about the ledger.", answer)], "I pay the toll."),  # the next message
            "B": (edited, "I ask about the ledger."),  # the edit of exchange 2, resent
        }
        barrier = threading.Barrier(2)
        results = {}

        def tab(name):
            turns, pending = chats[name]
            try:
                barrier.wait(timeout=10)
                client().chat.completions.create(model=model, messages=messages(turns, pending))
                results[name] = 200
            except openai.APIStatusError as exc:
                results[name] = exc.status_code
            finally:
                connections.close_all()

        threads = [threading.Thread(target=tab, args=(name,)) for name in chats]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        outcomes.append(dict(results))
        assert set(seen) <= {200, 409}, f"round {round_number}: the server answered {seen}"
        assert set(results.values()) <= {200, 409}, f"round {round_number}: {results}"
        assert 200 in results.values(), f"round {round_number}: {results}"
        saved = save_chat(play_save)
        winners = [name for name, (turns, pending) in chats.items() if saved == (turns, pending)]
        assert winners, f"round {round_number}: the save is neither chat: {saved} ({results})"
        # The save is the chat of the last request that went through: a 409's retry never re-applied its chat.
        if results["A"] == 409:
            assert winners == ["B"]
        if results["B"] == 409:
            assert winners == ["A"]
    assert any(409 in r.values() for r in outcomes), f"no round raced: {outcomes}"


URL = "/v1/chat/completions"


def test_a_retry_never_re_applies_a_chat_another_request_replaced(proxy, upstream, play_save):
    """The `openai` SDKs send `X-Stainless-Retry-Count` and the same body on every attempt: a retry
    after another request wrote to the save is refused (409, not to be retried), nothing written."""
    model = f"axiom/{play_save.save_id}/test-model"
    first = proxy.post(URL, {"model": model, "messages": messages([], "I do thing 1.")}).json()
    answer = first["choices"][0]["message"]["content"]
    tab_a = {"model": model, "messages": messages([("I do thing 1.", answer)], "I pay the toll.")}
    sdk = {"X-Stainless-Retry-Count": "0"}
    assert proxy.post(URL, tab_a, headers=sdk).status_code == 200  # its client saw a timeout: it will retry
    # Nothing changed since: the retry goes through (one more alternative of the same proposal).
    assert proxy.post(URL, tab_a, headers={"X-Stainless-Retry-Count": "1"}).status_code == 200
    tab_b = {"model": model, "messages": messages([("I do thing 1.", "Edited in tab B.")], "I pay the toll.")}
    assert proxy.post(URL, tab_b).status_code == 200
    before = save_chat(play_save)
    response = proxy.post(URL, tab_a, headers={"X-Stainless-Retry-Count": "2"})
    assert response.status_code == 409 and response["x-should-retry"] == "false"
    assert response.json()["error"]["code"] == "history_conflict" and response.json()["error"]["current_turn"] == 1
    assert save_chat(play_save) == before == ([("I do thing 1.", "Edited in tab B.")], "I pay the toll.")
    # The same body as a new request (attempt 0) is the player's own: it goes through.
    assert proxy.post(URL, tab_a, headers=sdk).status_code == 200
    assert save_chat(play_save) == ([("I do thing 1.", answer)], "I pay the toll.")


def test_an_idempotency_key_names_the_request(proxy, upstream, play_save):
    model = f"axiom/{play_save.save_id}/test-model"
    body = {"model": model, "messages": messages([], "I do thing 1.")}
    key = {"Idempotency-Key": "req-1"}
    assert proxy.post(URL, body, headers=key).status_code == 200
    assert proxy.post(URL, body, headers=key).status_code == 200  # the same key, nothing changed since
    answer = upstream.answer_for("I do thing 1.", 2)
    assert (
        proxy.post(URL, {"model": model, "messages": messages([("I do thing 1.", answer)], "On.")}).status_code == 200
    )
    response = proxy.post(URL, body, headers=key)  # would rewind the turn the other request wrote
    assert response.status_code == 409
    assert save_chat(play_save) == ([("I do thing 1.", answer)], "On.")


def test_a_retry_of_a_request_that_lost_a_race_is_refused(proxy, upstream, play_save, monkeypatch):
    from studio.saves.errors import TurnConflict

    model = f"axiom/{play_save.save_id}/test-model"
    body = {"model": model, "messages": messages([], "I do thing 1.")}

    def lose(**kwargs):
        raise TurnConflict("Another request changed the save.", save_id=play_save.save_id, current_turn=0)

    with monkeypatch.context() as patch:
        patch.setattr("studio.proxy.services.proxy_sync", lose)
        assert proxy.post(URL, body, headers={"X-Stainless-Retry-Count": "0"}).status_code == 409
    response = proxy.post(URL, body, headers={"X-Stainless-Retry-Count": "1"})
    assert response.status_code == 409 and "lost a race" in response.json()["error"]["message"]
    assert not NarratorDraft.objects.filter(game_save=play_save).exists()
