"""The per-save lore activation state: recorded by turn, read as of N, rolled back, copied to a fork."""

from __future__ import annotations

import pytest
from django.db import transaction
from hypothesis import given, settings
from hypothesis import strategies as st

from studio.memory.lore.activation_state import (
    activation_state_as_of,
    book_version_for,
    lore_activation_for_turn,
    lore_activation_rollback,
    lore_seed_for,
    record_activation,
)
from studio.memory import timeline
from studio.memory.models import LoreActivation
from studio.world.models import Event, Save
from studio.universes import services

pytestmark = pytest.mark.django_db


@pytest.fixture
def timed_book(universe, author):
    """Entries whose state carries across turns: sticky, cooldown, a coin flip, a first match."""
    services.lore_entry_create(
        universe=universe,
        user=author,
        title="Bell",
        text="The bell tolls.",
        keys=["bell"],
        activation={"sticky": 3, "cooldown": 4, "scan_depth": 1},
    )
    services.lore_entry_create(
        universe=universe,
        user=author,
        title="Coin",
        text="A coin spins.",
        keys=["coin"],
        activation={"probability": 50, "scan_depth": 1},
    )
    services.lore_entry_create(
        universe=universe,
        user=author,
        title="Oath",
        text="An oath binds.",
        keys=["oath"],
        activation={"after_first_match": "keep", "scan_depth": 1},
    )
    return universe


def play_turn(save, text):
    """Evaluate and record the next turn with `text` as its input, then append the turn."""
    turn = save.current_turn + 1
    result, extra = lore_activation_for_turn(save=save, pending_input=text, turn_id=turn)
    record_activation(save=save, turn_id=turn, result=result, **extra)
    Event.objects.create(game_save=save, turn_id=turn, player_input=text, narrative="The narrator answers.")
    save.current_turn = turn
    save.save(update_fields=["current_turn"])
    return result


@pytest.fixture
def fresh_save(timed_book):
    return Save.objects.create(universe=timed_book, name="Run", save_id="lorestate1")


def test_state_as_of_reads_the_newest_row_at_or_before_n(fresh_save):
    states = {}
    for text in ["ring the bell", "", "swear an oath", "", "bell again"]:
        result = play_turn(fresh_save, text)
        states[result.turn] = result.state
    assert LoreActivation.objects.filter(game_save=fresh_save).count() == 5
    for turn, state in states.items():
        assert activation_state_as_of(save=fresh_save, turn_id=turn) == state
    assert activation_state_as_of(save=fresh_save, turn_id=0).to_dict() == {
        "sticky": {},
        "cooldown": {},
        "first_matched": {},
    }
    assert "bell" in states[1].sticky and "oath" in states[3].first_matched
    row = LoreActivation.objects.get(game_save=fresh_save, turn_id=2)
    assert row.activated == ["bell"] and row.seed == lore_seed_for(save=fresh_save, turn_id=2)


def test_rollback_restores_the_state_recorded_at_n(fresh_save):
    results = [play_turn(fresh_save, text) for text in ["ring the bell", "", "", "oath", "bell"]]
    assert lore_activation_rollback(save=fresh_save, target_turn=2) == 3
    assert sorted(LoreActivation.objects.filter(game_save=fresh_save).values_list("turn_id", flat=True)) == [1, 2]
    assert activation_state_as_of(save=fresh_save, turn_id=99) == results[1].state
    # The bell rang at turn 1 and is sticky at 2; at 3 its sticky window ends and the cooldown starts.
    Event.objects.filter(game_save=fresh_save, turn_id__gt=2).delete()
    fresh_save.current_turn = 2
    fresh_save.save()
    again = play_turn(fresh_save, "bell")
    assert again.explanations["bell"].code == "cooldown" and "bell" in again.state.cooldown


def test_fork_copies_rows_and_continues_identically(fresh_save):
    for text in ["ring the bell", "coin", "coin oath"]:
        play_turn(fresh_save, text)
    fork = Save.objects.create(
        universe=fresh_save.universe,
        name="Fork",
        save_id="lorestate2",
        forked_from=fresh_save,
        fork_turn=2,
        current_turn=2,
    )
    for event in Event.objects.filter(game_save=fresh_save, turn_id__lte=2):
        Event.objects.create(
            game_save=fork, turn_id=event.turn_id, player_input=event.player_input, narrative=event.narrative
        )
    timeline.table("lore_activations").copy(timeline.ForkContext(source=fresh_save, fork=fork, target_turn=2))
    assert LoreActivation.objects.filter(game_save=fork).count() == 2
    assert activation_state_as_of(save=fork, turn_id=2) == activation_state_as_of(save=fresh_save, turn_id=2)
    parent_turn_3 = LoreActivation.objects.get(game_save=fresh_save, turn_id=3)
    forked = play_turn(fork, "coin oath")
    assert forked.activated_ids == parent_turn_3.activated
    assert forked.state.to_dict() == parent_turn_3.state
    assert lore_seed_for(save=fork, turn_id=3) == parent_turn_3.seed  # same lineage root and generation


def test_a_new_generation_draws_new_rolls(fresh_save):
    seed_before = lore_seed_for(save=fresh_save, turn_id=4)
    fresh_save.timeline_generation += 1
    assert lore_seed_for(save=fresh_save, turn_id=4) != seed_before


def test_recording_a_turn_again_replaces_it(fresh_save):
    result, extra = lore_activation_for_turn(save=fresh_save, pending_input="bell", turn_id=1)
    record_activation(save=fresh_save, turn_id=1, result=result, **extra)
    other, extra = lore_activation_for_turn(save=fresh_save, pending_input="nothing", turn_id=1)
    record_activation(save=fresh_save, turn_id=1, result=other, **extra)
    assert LoreActivation.objects.get(game_save=fresh_save, turn_id=1).activated == []


def test_book_version_changes_with_every_edit(timed_book, author):
    first = book_version_for(timed_book)
    bell = timed_book.lore_entries.get(title="Bell")
    services.lore_entry_update(entry=bell, user=author, activation={"sticky": 5})
    second = book_version_for(timed_book)
    services.lore_entry_delete(entry=timed_book.lore_entries.get(title="Coin"), user=author)
    assert len({first, second, book_version_for(timed_book)}) == 3


@settings(max_examples=12)
@given(
    inputs=st.lists(st.sampled_from(["bell", "coin", "oath", "coin bell", ""]), min_size=2, max_size=7), data=st.data()
)
def test_property_rewind_to_n_gives_the_state_recorded_at_n(fresh_save, inputs, data):
    with transaction.atomic():
        sid = transaction.savepoint()
        save = Save.objects.create(universe=fresh_save.universe, name="P", save_id="prop-save")
        recorded = {result.turn: result.state for result in (play_turn(save, text) for text in inputs)}
        n = data.draw(st.integers(min_value=0, max_value=len(inputs)))
        lore_activation_rollback(save=save, target_turn=n)
        assert activation_state_as_of(save=save, turn_id=len(inputs)) == recorded.get(
            n, activation_state_as_of(save=save, turn_id=0)
        )
        transaction.savepoint_rollback(sid)
