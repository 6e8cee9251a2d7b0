"""A save played through the proxy in the studio's pages: its console (with the answer still
waiting as a narrator draft), timeline, "what the narrator saw", and a rewind that the next
request's chat then replays."""
from __future__ import annotations

import pytest

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
