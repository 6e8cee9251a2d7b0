"""Property: whatever a player does in the front end (new messages, swipes, edits of inputs
or answers, deletes), after the next request the save's Event_Log is exactly the chat's
settled turns, its pending turn is one open narrator draft holding the chat's last message,
and only answers the chat still holds were ever written."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from studio.saves.models import DraftStatus, NarratorDraft
from studio.world.models import Event, MemoryMode
from studio.saves.services import save_create
from tests.llm_server import ScriptedLLMServer
from tests.support.upstream import Upstream
from tests.proxy.player import Player

pytestmark = pytest.mark.django_db


@pytest.fixture
def light_upstream(settings, vector_memory):
    script = Upstream()
    server = ScriptedLLMServer(script).start()
    settings.AXIOM_LLM_BASE_URL = server.base_url
    settings.AXIOM_LLM_MODEL = "test-model"
    settings.AXIOM_LLM_MAX_RETRIES = 0
    yield script
    server.stop()


action = st.one_of(
    st.tuples(st.just("say")),
    st.tuples(st.just("swipe")),
    st.tuples(st.just("edit_answer"), st.integers(0, 20)),
    st.tuples(st.just("edit_input"), st.integers(0, 20)),
    st.tuples(st.just("delete"), st.integers(0, 20)),
)


@settings(max_examples=10)
@given(actions=st.lists(action, min_size=1, max_size=9))
def test_the_save_is_the_chat(proxy, light_upstream, universe, actions):
    game_save = save_create(universe=universe, name="property", memory_mode=MemoryMode.CLASSIC)
    player = Player(proxy, game_save)
    said = 0

    def say():
        nonlocal said
        said += 1
        player.say(f"Message {said}.")

    say()
    for step in actions:
        kind = step[0]
        if kind == "swipe":
            player.swipe()
        else:
            if kind == "edit_answer" and len(player.chat) > 1:
                turn = step[1] % (len(player.chat) - 1)
                player.chat[turn][1] += " (edited)"
            elif kind == "edit_input" and len(player.chat) > 1:
                turn = step[1] % (len(player.chat) - 1)
                player.chat[turn][0] += " (edited)"
            elif kind == "delete" and len(player.chat) > 1:
                # Keeps at least the first turn: a chat deleted back to nothing is a new chat, which
                # a save with turns refuses (tests/proxy/test_errors.py).
                player.delete_after(1 + step[1] % (len(player.chat) - 1))
            say()
        game_save.refresh_from_db()
        events = list(
            Event.objects.filter(game_save=game_save).order_by("turn_id").values_list("player_input", "narrative")
        )
        assert events == player.settled
        assert game_save.current_turn == len(player.settled)
        drafts = NarratorDraft.objects.filter(game_save=game_save, status=DraftStatus.OPEN)
        assert [(d.turn_id, d.player_input) for d in drafts] == [(len(player.settled) + 1, player.pending)]
