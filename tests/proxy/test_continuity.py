"""The continuity guard through the memory proxy: an answer is checked when it ends (deterministic checks; with the
model too when the front end asks, `X-Axiom-Continuity`), and its findings are kept with the turn, accepted, when the
chat's next message settles it; an answer that ended unchecked is checked then."""

from __future__ import annotations

import pytest

from studio.memory.continuity import guard as continuity_guard
from studio.memory.continuity.models import ContinuityFinding
from studio.saves.models import NarratorAlternative
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


@pytest.fixture
def checks(monkeypatch):
    """The texts the continuity guard checked, in order."""
    seen = []
    real = continuity_guard.continuity_check

    def spy(game_save, *, text, **kwargs):
        seen.append(text)
        return real(game_save, text=text, **kwargs)

    monkeypatch.setattr("studio.saves.narrator.guard.continuity_check", spy)
    return seen


def test_an_answer_is_checked_when_it_ends_and_kept_with_its_turn_when_settled(
    proxy, upstream, play_save, secret, checks
):
    player = Player(proxy, play_save)
    upstream.reply = Reply(content=LEAK)
    player.say("Kaël, how do we get in?")
    [pending] = ContinuityFinding.objects.filter(game_save=play_save)
    assert (pending.kind, pending.resolution) == ("leak", "")  # open: the answer is still pending
    assert checks == [LEAK]
    upstream.reply = None
    player.say("We go.")
    assert checks[0] == LEAK and checks.count(LEAK) == 1  # the settled text was not checked again
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


def test_an_answer_changed_since_its_check_is_checked_again_when_settled(proxy, upstream, play_save, secret, checks):
    player = Player(proxy, play_save)
    upstream.reply = Reply(content="Kaël shrugs.")
    player.say("Kaël, how do we get in?")
    assert checks == ["Kaël shrugs."] and not ContinuityFinding.objects.exists()
    NarratorAlternative.objects.filter(draft__game_save=play_save).update(text=LEAK)  # not the text checked
    player.chat[-1][1] = LEAK  # the chat shows it too
    upstream.reply = None
    player.say("We go.")
    assert checks[:2] == ["Kaël shrugs.", LEAK]
    [finding] = ContinuityFinding.objects.filter(game_save=play_save)
    assert (finding.turn_id, finding.kind, finding.resolution) == (1, "leak", "accepted")
