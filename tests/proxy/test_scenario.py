"""The issue's scenario through the proxy: 10 turns, a swipe, an edit of turn 6 (in place), a
delete back to turn 4, then 3 more turns. After each step the save equals a save played straight to the
same chat: its turns, facts, beliefs, mental models, vector chunks, and the narrator snapshots
it still has (what the narrator saw, each equal to the straight save's at that turn)."""

from __future__ import annotations

import pytest

from studio.saves.models import NarratorAlternative
from studio.world.models import Event
from tests.proxy.player import Player, narrator_snapshots, play_straight, state

# Transactional: the turn jobs (embedding, the living pipeline) run when each append commits.
pytestmark = pytest.mark.django_db(transaction=True)


def check_same(proxy, universe, vector_memory, player, game_save, snapshot_turns, equal_turns=None):
    """The save equals one played straight to the chat; its snapshots are `snapshot_turns`, those of
    `equal_turns` (default: all) equal to the straight save's (a turn after an edit in place keeps
    what the narrator saw then: the old text)."""
    straight = play_straight(proxy, universe, player.settled, player.pending)
    ours_state = state(game_save, vector_memory)
    assert ours_state == state(straight, vector_memory)
    # Not vacuous: the living memory ran (facts, beliefs) and every turn was embedded.
    assert ours_state["facts"] and ours_state["beliefs"]
    assert {turn for turn, kind, _ in ours_state["chunks"] if kind == "narrative"} == set(
        range(1, len(player.settled) + 1)
    )
    ours, theirs = narrator_snapshots(game_save), narrator_snapshots(straight)
    assert sorted(ours) == snapshot_turns
    assert sorted(theirs) == list(range(1, len(player.settled) + 1))
    for turn in snapshot_turns if equal_turns is None else equal_turns:
        assert ours[turn] == theirs[turn], f"narrator snapshot of turn {turn}"
    if len(ours) > 2:
        assert ours[max(ours)][3], "the narrator saw a memory context"


def test_swipe_edit_delete_follow_the_chat(proxy, upstream, universe, vector_memory, play_save):
    player = Player(proxy, play_save, stream=True)
    for turn in range(1, 11):
        player.say(f"I do thing {turn} at the harbour.")
    play_save.refresh_from_db()
    assert play_save.current_turn == 9  # turn 10's answer is a proposal until the chat carries it
    check_same(proxy, universe, vector_memory, player, play_save, list(range(1, 10)))

    # A swipe of the last answer: another alternative of the pending turn, nothing written.
    first = player.chat[-1][1]
    second = player.swipe()
    assert second != first
    play_save.refresh_from_db()
    assert play_save.current_turn == 9
    assert NarratorAlternative.objects.filter(draft__game_save=play_save, draft__turn_id=10).count() == 2
    check_same(proxy, universe, vector_memory, player, play_save, list(range(1, 10)))

    # Edit turn 6's narration, then send the next message: turn 6 edited in place (re-embedded,
    # re-extracted; nothing after it redone), turn 10 appended with the swiped answer, never the first.
    generation = play_save.timeline_generation
    player.edit_answer(6, "You hesitate; the harbour master laughs at you instead.")
    player.say("I ask about the ledger.")
    play_save.refresh_from_db()
    assert play_save.current_turn == 10 and play_save.timeline_generation == generation  # no rewind
    assert Event.objects.get(game_save=play_save, turn_id=10).narrative == second
    assert not Event.objects.filter(game_save=play_save, narrative=first).exists()
    check_same(proxy, universe, vector_memory, player, play_save, list(range(1, 11)), equal_turns=[1, 2, 3, 4, 5, 6])

    # Delete back to turn 4, then a new message: rewound to 4.
    player.delete_after(4)
    player.say("I leave the harbour for the hills.")
    play_save.refresh_from_db()
    assert play_save.current_turn == 4
    check_same(proxy, universe, vector_memory, player, play_save, [1, 2, 3, 4])

    for turn in range(3):
        player.say(f"I climb higher, step {turn}.")
    play_save.refresh_from_db()
    assert play_save.current_turn == 7
    check_same(proxy, universe, vector_memory, player, play_save, [1, 2, 3, 4, 5, 6, 7])
