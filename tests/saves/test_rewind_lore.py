"""Lore activation is part of the timeline: turn_append records it, rewind restores it, fork copies it.

Through the real services (`turn_append`, `CheckpointManager.rewind` / `fork`): rewinding to
N leaves exactly the activation rows (state, activated entries, seeds) recorded at N, a fork
at N continues with the source's rolls, and a replay of the Event_Log recomputes the rows.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from studio.memory.lore.activation_state import activation_state_as_of, lore_activation_replay
from studio.memory.models import LoreActivation
from studio.saves.checkpoints import CheckpointManager
from studio.world.models import Save
from studio.saves.services import turn_append
from studio.universes import services

pytestmark = pytest.mark.django_db

INPUTS = ["ring the bell", "flip a coin", "swear an oath", "coin and bell", "wait", "bell", "coin"]


@pytest.fixture
def timed_universe(universe, author):
    """Entries whose state carries across turns: sticky + cooldown, coin flips, a first match."""
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
        title="Gull",
        text="A gull cries.",
        keys=["coin", "bell"],
        activation={"probability": 30, "sticky": 2, "scan_depth": 1},
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


def rows(save) -> dict[int, tuple]:
    return {
        r.turn_id: (r.state, r.activated, r.sequence, r.seed)
        for r in LoreActivation.objects.filter(game_save=save).order_by("turn_id")
    }


def play(save, inputs) -> None:
    for text in inputs:
        turn_append(game_save=save, player_input=text, narrative="The tide turns.")


def test_turn_append_records_every_turn(timed_universe, fake_vectors):
    save = Save.objects.create(universe=timed_universe, name="Run")
    play(save, INPUTS[:3])
    recorded = rows(save)
    assert sorted(recorded) == [1, 2, 3]
    assert recorded[1][1][:1] == ["bell"] and "bell" in recorded[1][0]["sticky"]
    assert "bell" in recorded[2][1]  # sticky: no key in turn 2's input, still active


def test_replay_recomputes_the_recorded_rows(timed_universe, fake_vectors):
    save = Save.objects.create(universe=timed_universe, name="Run")
    play(save, INPUTS)
    before = rows(save)
    LoreActivation.objects.filter(game_save=save, turn_id__gte=3).delete()
    assert lore_activation_replay(save=save, from_turn=3) == len(INPUTS) - 2
    assert rows(save) == before


@settings(max_examples=10)
@given(inputs=st.lists(st.sampled_from(INPUTS), min_size=2, max_size=7), data=st.data())
def test_property_rewind_to_n_restores_the_state_recorded_at_n(
    timed_universe, fake_vectors, django_capture_on_commit_callbacks, inputs, data
):
    save = Save.objects.create(universe=timed_universe, name="P")
    play(save, inputs)
    recorded = rows(save)
    states = {n: activation_state_as_of(save=save, turn_id=n) for n in range(len(inputs) + 1)}
    n = data.draw(st.integers(min_value=0, max_value=len(inputs) - 1), label="rewind to")
    with django_capture_on_commit_callbacks(execute=True):
        result = CheckpointManager(vector_memory=fake_vectors).rewind(save, n)
    assert result.counts["lore_activations"] == len(inputs) - n
    assert rows(save) == {t: v for t, v in recorded.items() if t <= n}
    assert activation_state_as_of(save=save, turn_id=10_000) == states[n]
    # The next turn is evaluated from the state at N (with the new generation's rolls).
    turn_append(game_save=save, player_input=inputs[n], narrative="Again.")
    assert LoreActivation.objects.get(game_save=save, turn_id=n + 1).seed.endswith(f":1:{n + 1}")
    save.delete()


@settings(max_examples=10)
@given(inputs=st.lists(st.sampled_from(INPUTS), min_size=2, max_size=7), data=st.data(), rewound=st.booleans())
def test_property_a_fork_at_n_continues_identically(
    timed_universe, fake_vectors, django_capture_on_commit_callbacks, inputs, data, rewound
):
    save = Save.objects.create(universe=timed_universe, name="P")
    manager = CheckpointManager(vector_memory=fake_vectors)
    if rewound:  # a save on its second timeline: the fork must take its generation along
        play(save, ["bell", "coin"])
        with django_capture_on_commit_callbacks(execute=True):
            manager.rewind(save, 0)
    play(save, inputs)
    recorded = rows(save)
    n = data.draw(st.integers(min_value=0, max_value=len(inputs) - 1), label="fork at")
    with django_capture_on_commit_callbacks(execute=True):
        fork = manager.fork(save, n)
    assert fork.timeline_generation == save.timeline_generation
    assert rows(fork) == {t: v for t, v in recorded.items() if t <= n}
    play(fork, inputs[n:])
    assert rows(fork) == recorded
    fork.delete()
    save.delete()
