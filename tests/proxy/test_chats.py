"""A save per chat, without set-up: under `axiom/u/<universe>/<model>` a chat that continues none of
the user's saves of that universe gets a new save (opening from its greeting), and the chat's later
requests find it. Before, every new chat needed a new save and a new model id made by hand."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from studio.proxy.models import ProxyChat
from studio.roles import PLAYTESTERS
from studio.world.models import Event, Save
from tests.proxy.frontends import GREETING, sillytavern

pytestmark = pytest.mark.django_db

URL = "/v1/chat/completions"
MODEL = "axiom/u/test-world/test-model"


def send(api, chat, pending, **kind):
    response = api.post(URL, sillytavern(MODEL, chat, pending, stream=False, **kind))
    assert response.status_code == 200, response.content
    return (
        response["X-Axiom-Save"],
        response["X-Axiom-Save-Created"] == "true",
        response.json()["choices"][0]["message"]["content"],
    )


def history(save_id):
    return list(
        Event.objects.filter(game_save__save_id=save_id).order_by("turn_id").values_list("player_input", "narrative")
    )


def test_a_new_chat_gets_a_save_and_its_next_requests_find_it(proxy, upstream, universe, playtester):
    save_id, created, first = send(proxy, [], "Hi, Mira.")
    assert created
    game_save = Save.objects.get(save_id=save_id)
    assert game_save.universe == universe and game_save.is_living and game_save.name == "Chat: Hi, Mira."
    assert ProxyChat.objects.get(game_save=game_save).user == playtester
    assert history(save_id) == [("", GREETING)]  # the save opens with the chat's greeting
    again, created, swiped = send(proxy, [], "Hi, Mira.")  # a swipe of the first answer: the same chat
    assert (again, created) == (save_id, False) and swiped != first
    chat = [("Hi, Mira.", swiped)]
    assert send(proxy, chat, "What do you owe?")[:2] == (save_id, False)
    assert history(save_id) == [("", GREETING), ("Hi, Mira.", swiped)]

    # Another chat with the same card: its own save; the first chat still finds its own.
    other, created, hello = send(proxy, [], "Evening. Any work?")
    assert created and other != save_id
    answer = send(proxy, chat, "What do you owe?")[2]  # a swipe in the first chat
    chat.append(("What do you owe?", answer))
    assert send(proxy, chat, "I pay it.")[:2] == (save_id, False)
    assert send(proxy, [("Evening. Any work?", hello)], "I take it.")[:2] == (other, False)
    assert history(other) == [("", GREETING), ("Evening. Any work?", hello)]

    # An edit of the first answer (in place) and a continue request still find the chat's save.
    chat[0] = (chat[0][0], "*Mira sighs.* Hello again.")
    assert send(proxy, chat, "I pay it.")[:2] == (save_id, False)
    assert history(save_id)[1] == ("Hi, Mira.", "*Mira sighs.* Hello again.")
    assert send(proxy, chat, "I pay it.", kind="continue", partial="She counts")[:2] == (save_id, False)
    assert Save.objects.filter(universe=universe).count() == 2


def test_another_users_chat_is_never_bound_to_my_save(make_api, upstream, universe, proxy):
    mine, _, answer = send(proxy, [], "Hi, Mira.")
    other = User.objects.create_user("other", password="pw")
    other.groups.add(Group.objects.get(name=PLAYTESTERS))
    universe.members.add(other)
    theirs, created, _ = send(make_api(other), [("Hi, Mira.", answer)], "What do you owe?")
    assert created and theirs != mine
    assert history(mine) == [("", GREETING)]  # untouched


def test_a_universe_the_key_may_not_play(make_api, upstream, universe, outsider):
    response = make_api(outsider).post(URL, sillytavern(MODEL, [], "Hi.", stream=False))
    assert response.status_code == 404 and response.json()["error"]["code"] == "universe_not_found"
    assert not Save.objects.exists()
