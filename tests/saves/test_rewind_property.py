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

from studio.memory.models import Observation as ObservationRow
from studio.saves.checkpoints import CheckpointManager
from studio.saves.models import Save
from studio.universes.models import Universe

from .scenario import play_turn, snapshot
from tests.fakes import FakeVectorMemory

pytestmark = pytest.mark.django_db

SUBJECTS = ["", "Kael", "Mira", "kael", "Ivo"]
_counter = itertools.count()


def draw_turn(data, save, fact_counter):
    """Draw one turn's facts, actions and refreshes against the save's current beliefs."""
    n_facts = data.draw(st.integers(0, 3), label="facts")
    facts = []
    for _ in range(n_facts):
        i = next(fact_counter)
        facts.append((f"fact {i}", data.draw(st.lists(st.sampled_from(SUBJECTS[1:]), max_size=2), label="entities")))
    held = list(ObservationRow.objects.filter(game_save=save).order_by("id").values_list("id", flat=True))
    old_facts = list(save.facts.order_by("id").values_list("id", flat=True))
    actions = []
    for _ in range(data.draw(st.integers(0, 3), label="actions")):
        kind = data.draw(st.sampled_from(["CREATE", "UPDATE", "DELETE"]) if held else st.just("CREATE"))
        refs = []
        if facts:
            refs += [("new", j) for j in data.draw(st.sets(st.integers(0, len(facts) - 1), max_size=2))]
        if old_facts:
            refs += data.draw(st.lists(st.sampled_from(old_facts), max_size=2))
        statement = f"belief {next(_counter)}"
        subject = data.draw(st.sampled_from(SUBJECTS))
        if kind == "CREATE":
            actions.append({"kind": kind, "statement": statement, "subject": subject, "source_fact_ids": refs})
        elif kind == "UPDATE":
            actions.append({"kind": kind, "statement": statement, "subject": subject,
                            "observation_id": data.draw(st.sampled_from(held)), "source_fact_ids": refs})
        else:
            actions.append({"kind": kind, "observation_id": data.draw(st.sampled_from(held))})
    refresh = []
    for subject in data.draw(st.lists(st.sampled_from(SUBJECTS), max_size=2, unique=True), label="refresh"):
        sources = data.draw(st.lists(st.sampled_from(held), max_size=3)) if held else []
        refresh.append((subject, f"model {next(_counter)}", sources))
    return {"facts": facts, "actions": actions, "refresh": refresh}


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
