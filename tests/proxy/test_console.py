"""A save played through the proxy in the studio's pages: its console (with the answer still
waiting as a narrator draft), timeline, "what the narrator saw", and a rewind that the next
request's chat then replays."""

from __future__ import annotations

import pytest
from django.utils.html import escape

from studio.saves.checkpoints import CheckpointManager
from tests.proxy.player import Player

pytestmark = pytest.mark.django_db(transaction=True)


def test_proxy_saves_in_the_console(client, proxy, upstream, play_save, playtester):
    player = Player(proxy, play_save)
    for text in ("I ask Mira about Kaël.", "I follow Kaël to Port Vey.", "I wait at the pier."):
        player.say(text)
    client.force_login(playtester)
    base = f"/saves/{play_save.save_id}"
    console = client.get(f"{base}/").content.decode()
    assert "I wait at the pier." in console  # the answer waiting for the next message: an open draft
    timeline = client.get(f"{base}/timeline/").content.decode()
    assert "I follow Kaël to Port Vey." in timeline
    saw = client.get(f"{base}/turns/2/narrator/")
    assert saw.status_code == 200
    page = saw.content.decode()
    assert "You are the narrator of Port Vey" in page and "I follow Kaël to Port Vey." in page

    # A rewind in the studio: the front end's next message brings the turns back from its chat.
    CheckpointManager().rewind(play_save, 1)
    player.say("I buy a lantern.")
    play_save.refresh_from_db()
    assert play_save.current_turn == 3


@pytest.mark.django_db
def test_the_pending_exchange_is_a_draft_on_the_console_and_in_the_api(client, proxy, upstream, play_save, playtester):
    """The last exchange is not a turn until the chat moves on; it is the save's open draft meanwhile."""
    player = Player(proxy, play_save)
    player.say("I ask Mira about Kaël.")
    first = player.say("I wait at the pier.")
    second = player.swipe()
    client.force_login(playtester)
    console = client.get(f"/saves/{play_save.save_id}/").content.decode()
    assert "I wait at the pier." in console and escape(second) in console  # the chosen alternative
    body = proxy.get(f"/api/v1/saves/{play_save.save_id}/draft").json()
    assert body["current_turn"] == 1 and body["draft"]["turn_id"] == 2
    assert body["draft"]["player_input"] == "I wait at the pier."
    assert [(a["text"], a["status"], a["chosen"]) for a in body["draft"]["alternatives"]] == [
        (first, "done", False),
        (second, "done", True),
    ]
    player.say("I leave.")  # the chat moves on: the answer becomes turn 2, and the next one waits
    assert proxy.get(f"/api/v1/saves/{play_save.save_id}/draft").json()["draft"]["turn_id"] == 3
