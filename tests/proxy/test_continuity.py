"""The continuity guard through the memory proxy: an answer is checked when the chat's next message settles it
(its findings kept with the turn, accepted), or as soon as it ends when the front end asks (`X-Axiom-Continuity`)."""

from __future__ import annotations

import pytest

from studio.memory.continuity.models import ContinuityFinding
from studio.world.models import LoreEntry
from tests.llm_server import Reply
from tests.proxy.player import Player

pytestmark = pytest.mark.django_db

LEAK = 'Kaël grins. "The vault under the chapel opens only when the silver bell rings at midnight."'


@pytest.fixture
def secret(universe):
    return LoreEntry.objects.create(
        universe=universe,
        entry_id="vault",
        title="The Vault",
        kind="concept",
        known_by=[],
        text="The vault under the chapel opens only when the silver bell rings at midnight.",
    )


def test_an_answer_settled_by_the_next_message_is_checked_and_kept_with_its_turn(proxy, upstream, play_save, secret):
    player = Player(proxy, play_save)
    upstream.reply = Reply(content=LEAK)
    player.say("Kaël, how do we get in?")
    assert not ContinuityFinding.objects.exists()  # still the pending answer
    upstream.reply = None
    player.say("We go.")
    [finding] = ContinuityFinding.objects.filter(game_save=play_save)
    assert (finding.turn_id, finding.kind, finding.character, finding.item_label, finding.resolution) == (
        1,
        "leak",
        "Kaël",
        "lore vault",
        "accepted",
    )


def test_a_front_end_may_ask_for_the_check_as_soon_as_the_answer_ends(proxy, upstream, play_save, secret):
    upstream.reply = Reply(content=LEAK)
    body = {
        "model": f"axiom/{play_save.save_id}/test-model",
        "stream": False,
        "messages": [{"role": "user", "content": "Kaël, how do we get in?"}],
    }
    response = proxy.post("/v1/chat/completions", body, headers={"X-Axiom-Continuity": "check"})
    assert response.status_code == 200 and response["X-Axiom-Continuity"] == "leak=1, presence=0, contradiction=0"
    [finding] = ContinuityFinding.objects.filter(game_save=play_save)
    assert (finding.turn_id, finding.kind, finding.resolution) == (1, "leak", "")  # open: the chat has not moved on
    plain = proxy.post("/v1/chat/completions", body)
    assert "X-Axiom-Continuity" not in plain
