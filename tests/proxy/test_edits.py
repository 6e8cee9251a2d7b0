"""An edit costs one turn: a resent chat that differs from the save only in the text of earlier
messages edits those turns in place, as the Console does; the save is rewound only when messages
were added or removed in the middle, or the chat is another branch. Before, fixing a typo in
answer 3 rewound the save and re-appended every later turn (on a living save, the memory jobs'
model calls went from 32 to 63; the narrator snapshots from 39 to 2)."""

from __future__ import annotations

import pytest

from studio.memory.models import Fact
from studio.proxy.sync import MAX_IN_PLACE, SyncPlan, sync_plan
from studio.saves.models import NarratorSnapshot
from studio.world.models import Event, MemoryMode
from studio.saves.services import save_create
from tests.llm_server import operation_of
from tests.proxy.player import Player

SAVE = [(f"in {n}", f"out {n}") for n in range(1, 11)]


def edited(turns, *indexes):
    return [(i, f"{o} (edited)") if index in indexes else (i, o) for index, (i, o) in enumerate(turns)]


@pytest.mark.parametrize(
    "chat, plan",
    [
        (SAVE, SyncPlan(keep=10, edits=(), append_from=10)),  # the same chat
        (SAVE + [("in 11", "out 11")], SyncPlan(keep=10, edits=(), append_from=10)),  # the next turn
        (edited(SAVE, 2), SyncPlan(keep=10, edits=((3, "in 3", "out 3 (edited)"),), append_from=10)),  # answer 3 edited
        (
            edited(SAVE, 2, 6) + [("in 11", "x")],
            SyncPlan(keep=10, edits=((3, "in 3", "out 3 (edited)"), (7, "in 7", "out 7 (edited)")), append_from=10),
        ),
        (edited(SAVE[:6], 2), SyncPlan(keep=6, edits=((3, "in 3", "out 3 (edited)"),), append_from=6)),  # and cut at 6
        (SAVE[:4], SyncPlan(keep=4, edits=(), append_from=4)),  # deleted back to turn 4
        (SAVE[:4] + SAVE[5:], SyncPlan(keep=4, edits=(), append_from=4)),  # turn 5 removed in the middle
        (SAVE[:4] + [("new", "x")] + SAVE[4:], SyncPlan(keep=4, edits=(), append_from=4)),  # one added in the middle
        (edited(SAVE, 4, 5, 6), SyncPlan(keep=4, edits=(), append_from=4)),  # another branch from turn 5
    ],
)
def test_the_plan_is_the_least_work_that_follows_the_chat(chat, plan):
    assert MAX_IN_PLACE == 2
    run = next((index for index, (a, b) in enumerate(zip(SAVE, chat)) if a != b), min(len(SAVE), len(chat)))
    assert sync_plan(save_turns=SAVE, start=1, run=run, chat_turns=chat) == plan


def pipeline_calls(upstream) -> list[str]:
    return [operation_of(request) for request in upstream.server.requests if operation_of(request)]


@pytest.mark.django_db(transaction=True)
def test_an_edit_of_answer_3_in_a_30_exchange_living_chat_re_extracts_one_turn(proxy, upstream, universe):
    game_save = save_create(universe=universe, name="Thirty", memory_mode=MemoryMode.LIVING)
    player = Player(proxy, game_save)
    per_turn = []
    for n in range(1, 31):
        before = len(pipeline_calls(upstream))
        player.say(f"I do thing {n} at the harbour with Kaël.")
        per_turn.append(len(pipeline_calls(upstream)) - before)
    game_save.refresh_from_db()
    assert game_save.current_turn == 29 and NarratorSnapshot.objects.filter(game_save=game_save).count() == 29
    one_turn = max(per_turn[1:])  # the model calls of one turn's living job (extract, consolidate, reflect)
    assert one_turn >= 2
    generation = game_save.timeline_generation
    facts_after_3 = set(Fact.objects.filter(game_save=game_save, turn_id__gt=3).values_list("pk", flat=True))

    before = len(pipeline_calls(upstream))
    player.edit_answer(3, "You hesitate at the pier; the harbour master laughs instead.")
    player.swipe()  # resends the chat: the same messages, answer 3's text changed
    calls = pipeline_calls(upstream)[before:]
    assert calls and len(calls) <= one_turn, calls  # one turn re-extracted, not 27
    game_save.refresh_from_db()
    assert (game_save.current_turn, game_save.timeline_generation) == (29, generation)  # nothing rewound
    assert Event.objects.get(game_save=game_save, turn_id=3).narrative.startswith("You hesitate at the pier")
    assert NarratorSnapshot.objects.filter(game_save=game_save).count() == 29  # what the narrator saw is kept
    assert set(Fact.objects.filter(game_save=game_save, turn_id__gt=3).values_list("pk", flat=True)) == facts_after_3
    assert Fact.objects.filter(game_save=game_save, turn_id=3).exists()  # turn 3 re-extracted from its new text
