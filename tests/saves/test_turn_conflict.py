"""The expected-turn checks of turn_append and rewind: in the service, under the save's lock."""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from studio.memory.models import Job, JobKind
from studio.saves.checkpoints import CheckpointManager
from studio.saves.errors import TurnConflict
from studio.world.models import Event, Save
from studio.saves.services import turn_append

from tests.fakes import FakeVectorMemory

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_runner(monkeypatch):
    """Queued jobs stay queued (these tests are about the turn rows)."""
    monkeypatch.setattr("studio.memory.jobs.dispatch.send", lambda job_id, countdown=0: None)


def test_append_with_the_expected_turn_id_appends_it(game_save, no_runner):
    event = turn_append(game_save=game_save, player_input="go", narrative="Four.", expected_turn_id=4)
    assert event.turn_id == 4 and game_save.current_turn == 4


def test_append_against_a_stale_turn_writes_nothing(game_save, no_runner):
    turn_append(game_save=game_save, player_input="go", narrative="Four.", expected_turn_id=4)
    with pytest.raises(TurnConflict) as info:
        turn_append(game_save=game_save, player_input="go", narrative="Four.", expected_turn_id=4)
    assert info.value.current_turn == 4 and info.value.save_id == game_save.save_id
    assert "the next turn is 5, not 4" in str(info.value)
    assert list(Event.objects.filter(game_save=game_save).values_list("turn_id", flat=True)) == [1, 2, 3, 4]
    assert Job.objects.filter(game_save=game_save, kind=JobKind.EMBED_TURN).count() == 1


def test_append_without_an_expected_turn_is_not_checked(game_save, no_runner):
    turn_append(game_save=game_save, player_input="go", narrative="Four.")
    assert turn_append(game_save=game_save, player_input="go", narrative="Five.").turn_id == 5


@pytest.mark.django_db(transaction=True)
def test_two_appends_against_the_same_turn_at_once_append_one(game_save, no_runner):
    """Two requests made from the same page state, in two threads: one turn, one conflict."""
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def submit(text):
        try:
            barrier.wait(timeout=10)
            turn_append(
                game_save=Save.objects.get(pk=game_save.pk), player_input="go", narrative=text, expected_turn_id=4
            )
            outcomes.append("appended")
        except TurnConflict:
            outcomes.append("conflict")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=submit, args=(f"Same turn {n}.",)) for n in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(outcomes) == ["appended", "conflict"]
    assert Event.objects.filter(game_save=game_save).count() == 4
    assert Save.objects.get(pk=game_save.pk).current_turn == 4


def test_rewind_against_a_stale_current_turn_changes_nothing(game_save, no_runner):
    vector = FakeVectorMemory()
    with pytest.raises(TurnConflict) as info:
        CheckpointManager(vector_memory=vector).rewind(game_save, 1, expected_current_turn=2)
    assert info.value.current_turn == 3 and "not 2" in str(info.value)
    fresh = Save.objects.get(pk=game_save.pk)
    assert (fresh.current_turn, fresh.timeline_generation) == (3, 0)
    assert not Job.objects.filter(game_save=game_save).exists()
    result = CheckpointManager(vector_memory=vector).rewind(game_save, 1, expected_current_turn=3)
    assert result.changed and Save.objects.get(pk=game_save.pk).current_turn == 1
