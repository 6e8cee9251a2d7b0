"""Property: after random play, rewinding to N gives exactly the state recorded at N.

Random sequences of turns with facts, consolidations (CREATE / UPDATE with statement and
subject changes, citing new and older facts / DELETE) and mental-model refreshes. The
snapshot compares events, state, facts, each belief's statement, subject, sources, proof
count, trail and whether it is held, and each mental model's summary, sources and versions.
Stale flags and clamped `updated_turn_id` are excluded, as the seed prescribes them.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from studio.saves.checkpoints import CheckpointManager
from studio.world.models import Save, Universe

from .scenario import draw_turn, play_turn, snapshot
from tests.fakes import FakeVectorMemory

pytestmark = pytest.mark.django_db

_counter = itertools.count()


@settings(max_examples=40)
@given(data=st.data())
def test_rewind_restores_recorded_state(db, data):
    world, _ = Universe.objects.get_or_create(slug="prop", defaults={"name": "Prop"})
    save = Save.objects.create(universe=world, name="p", save_id=f"prop{next(_counter)}", memory_mode="living")
    vector = FakeVectorMemory()
    fact_counter = itertools.count()
    snaps = {0: snapshot(save)}
    turns = data.draw(st.integers(1, 8), label="turns")
    for _ in range(turns):
        play_turn(save, vector=vector, **draw_turn(data, save, fact_counter))
        snaps[save.current_turn] = snapshot(save)
    manager = CheckpointManager(vector_memory=vector)

    target = data.draw(st.integers(0, turns - 1), label="target")
    preview = manager.preview(save, target)
    result = manager.rewind(save, target)
    assert snapshot(save) == snaps[target]
    assert {k: v for k, v in result.counts.items() if k != "vector_chunks"} == preview.counts

    # Play on from the rewound turn, then rewind again into the shared past.
    for _ in range(data.draw(st.integers(0, 3), label="replay")):
        play_turn(save, vector=vector, **draw_turn(data, save, fact_counter))
    if target > 0:
        earlier = data.draw(st.integers(0, target - 1), label="earlier")
        manager.rewind(save, earlier)
        assert snapshot(save) == snaps[earlier]
