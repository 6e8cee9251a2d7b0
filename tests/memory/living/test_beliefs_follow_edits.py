"""Memory that follows edits (issue 30): a belief whose every source fact is gone after an
edit or a rewind is retired, in its trail, rewind-exactly; identical beliefs are one belief.

The edit is what the living job of an edited turn does first (`forget_turn_outputs`: the
turn's old facts go), then its new facts; rewinds go through `CheckpointManager.rewind`.
"""

from __future__ import annotations

import itertools

import pytest
from django.db import transaction
from hypothesis import given, settings
from hypothesis import strategies as st

from studio.memory.facts import Fact, insert_facts
from studio.memory.models import Fact as FactRow
from studio.memory.models import Observation as ObservationRow
from studio.memory.observations import get_observations
from studio.memory.pipeline.living import forget_turn_outputs
from studio.saves.checkpoints import CheckpointManager
from studio.world.models import Save, Universe
from tests.fakes import FakeVectorMemory
from tests.saves.scenario import play_turn, snapshot

pytestmark = pytest.mark.django_db
_counter = itertools.count()


@pytest.fixture
def save(db):
    world, _ = Universe.objects.get_or_create(slug="edits", defaults={"name": "Edits"})
    return Save.objects.create(universe=world, name="e", save_id=f"edits{next(_counter)}", memory_mode="living")


def edit_turn(save: Save, turn: int, new_facts=("a new fact",)) -> dict:
    """What the living job of an edited older turn writes: the old facts go, the new ones come."""
    save.refresh_from_db()
    with transaction.atomic():
        done = forget_turn_outputs(save, turn)
        insert_facts(save.save_id, turn, [Fact(text, entities=[]) for text in new_facts])
    return done


def held(save) -> list[str]:
    return sorted(b.statement for b in get_observations(save.save_id))


def test_an_edit_that_removes_a_beliefs_only_sources_retires_it_in_its_trail(save):
    play_turn(save, facts=[("Mira keeps turning up", ["Mira"])])
    two = play_turn(
        save,
        facts=[("Mira lends Wren a lamp", ["Mira"])],
        actions=[
            {
                "kind": "CREATE",
                "statement": "Mira keeps turning up.",
                "subject": "Mira",
                "source_fact_ids": [("new", 0)],
            },
            {
                "kind": "CREATE",
                "statement": "Wren owes Mira a lamp.",
                "subject": "Wren",
                "source_fact_ids": [("new", 0)],
            },
        ],
    )
    play_turn(
        save,
        facts=[("Wren still owes the lamp", ["Wren"])],
        actions=[
            {
                "kind": "UPDATE",
                "statement": "Wren owes Mira a lamp.",
                "subject": "Wren",
                "observation_id": ObservationRow.objects.get(subject="Wren").pk,
                "source_fact_ids": [("new", 0)],
            }
        ],
    )
    assert held(save) == ["Mira keeps turning up.", "Wren owes Mira a lamp."]

    done = edit_turn(save, 2)  # Mira is edited out of turn 2

    assert done["beliefs"] == {"updated": 2, "retired": 1}
    assert held(save) == ["Wren owes Mira a lamp."]  # not in the beliefs page, not in the context
    mira = ObservationRow.all_objects.get(subject="Mira")
    assert mira.deleted_turn_id == 3 and mira.sources == []
    assert mira.history[-1]["action"] == "DELETE" and mira.history[-1]["turn_id"] == 3
    assert "turn 2 was edited" in mira.history[-1]["reason"]
    wren = ObservationRow.objects.get(subject="Wren")
    assert wren.proof_count == 1 and wren.stale  # one source left: kept, re-examined next pass
    assert not FactRow.objects.filter(pk__in=two["fact_ids"]).exists()


def test_a_rewind_never_brings_back_a_belief_whose_sources_an_edit_deleted(save):
    play_turn(
        save,
        facts=[("Mira lends Wren a lamp", ["Mira"])],
        actions=[
            {"kind": "CREATE", "statement": "Mira is generous.", "subject": "Mira", "source_fact_ids": [("new", 0)]}
        ],
    )
    play_turn(
        save,
        facts=[("Mira lends Wren a coat", ["Mira"])],
        actions=[
            {
                "kind": "UPDATE",
                "statement": "Mira is very generous.",
                "subject": "Mira",
                "observation_id": ObservationRow.objects.get().pk,
                "source_fact_ids": [("new", 0)],
            }
        ],
    )
    play_turn(save)
    edit_turn(save, 1)  # the lamp is gone: the belief keeps turn 2's coat
    assert held(save) == ["Mira is very generous."]
    manager = CheckpointManager(vector_memory=FakeVectorMemory())

    manager.rewind(save, 1)  # as of turn 1 its only source is the deleted lamp

    assert held(save) == []
    belief = ObservationRow.all_objects.get()
    assert belief.deleted_turn_id == 1 and belief.proof_count == 0
    assert [h["action"] for h in belief.history] == ["CREATE", "DELETE"]
    assert belief.history[-1]["reason"]
    before = snapshot(save)
    manager.rewind(save, 1)  # again: nothing changes
    assert snapshot(save) == before


def test_identical_beliefs_are_one_belief(save):
    play_turn(
        save,
        facts=[("Mira waves", ["Mira"])],
        actions=[
            {
                "kind": "CREATE",
                "statement": "Mira keeps turning up.",
                "subject": "Mira",
                "source_fact_ids": [("new", 0)],
            }
        ],
    )
    second = play_turn(
        save,
        facts=[("Mira is at the quay", ["Mira"])],
        actions=[
            {
                "kind": "CREATE",
                "statement": "mira keeps  turning up",
                "subject": "MIRA",
                "source_fact_ids": [("new", 0)],
            },
            {
                "kind": "CREATE",
                "statement": "Mira keeps turning up.",
                "subject": "Wren",
                "source_fact_ids": [("new", 0)],
            },
        ],
    )
    assert second["counts"]["merged"] == 1 and second["counts"]["created"] == 1  # another subject is another belief
    mira = ObservationRow.objects.get(subject_key="mira")
    assert mira.proof_count == 2 and [h["action"] for h in mira.history] == ["CREATE", "UPDATE"]
    assert mira.statement == "Mira keeps turning up."

    # An update that makes one belief say what another says folds it into the other.
    other = play_turn(
        save,
        facts=[("Mira hums", ["Mira"])],
        actions=[{"kind": "CREATE", "statement": "Mira hums.", "subject": "Mira", "source_fact_ids": [("new", 0)]}],
    )
    hums = ObservationRow.objects.get(statement="Mira hums.")
    fold = play_turn(
        save,
        facts=[("Mira is at the quay again", ["Mira"])],
        actions=[
            {
                "kind": "UPDATE",
                "statement": "Mira keeps turning up",
                "subject": "Mira",
                "observation_id": hums.pk,
                "source_fact_ids": [("new", 0)],
            }
        ],
    )
    assert fold["counts"]["merged"] == 1
    assert [b.statement for b in get_observations(save.save_id, subject="Mira")] == ["Mira keeps turning up."]
    mira.refresh_from_db()
    assert mira.proof_count == 4 and other["fact_ids"][0] in {s["fact_id"] for s in mira.sources}
    hums = ObservationRow.all_objects.get(pk=hums.pk)
    assert hums.deleted_turn_id == 4 and f"#{mira.pk}" in hums.history[-1]["reason"]

    # Rewind before the fold: two beliefs again, exactly as they were.
    CheckpointManager(vector_memory=FakeVectorMemory()).rewind(save, 3)
    assert sorted(b.statement for b in get_observations(save.save_id, subject="Mira")) == [
        "Mira hums.",
        "Mira keeps turning up.",
    ]
    mira.refresh_from_db()
    assert mira.proof_count == 2


# -- the property: random play with edits and rewinds ------------------------------------------

SUBJECTS = ["", "Kael", "Mira"]
STATEMENTS = ["Kael owes Mira.", "Mira is kind.", "The tide is rising.", "kael owes mira"]


def draw_turn(data, save, fact_counter):
    facts = [(f"fact {next(fact_counter)}", ["Kael"]) for _ in range(data.draw(st.integers(0, 2), label="facts"))]
    held_ids = list(ObservationRow.objects.filter(game_save=save).order_by("id").values_list("id", flat=True))
    old_facts = list(save.facts.order_by("id").values_list("id", flat=True))
    actions = []
    for _ in range(data.draw(st.integers(0, 3), label="actions")):
        kind = data.draw(st.sampled_from(["CREATE", "UPDATE", "DELETE"]) if held_ids else st.just("CREATE"))
        refs = [("new", j) for j in data.draw(st.sets(st.integers(0, len(facts) - 1), max_size=2))] if facts else []
        if old_facts:
            refs += data.draw(st.lists(st.sampled_from(old_facts), max_size=2))
        action = {
            "kind": kind,
            "statement": data.draw(st.sampled_from(STATEMENTS)),
            "subject": data.draw(st.sampled_from(SUBJECTS)),
            "source_fact_ids": refs,
        }
        if kind != "CREATE":
            action["observation_id"] = data.draw(st.sampled_from(held_ids))
        actions.append(action)
    return {"facts": facts, "actions": actions}


def assert_every_held_belief_stands_on_stored_facts(save):
    stored = set(FactRow.objects.filter(game_save=save).values_list("pk", flat=True))
    for belief in ObservationRow.objects.filter(game_save=save):
        cited = {s["fact_id"] for s in belief.sources}
        assert cited <= stored, f"belief {belief.statement!r} cites deleted facts"
        ever_cited = any(h.get("sources_added") for h in belief.history)
        assert cited or not ever_cited, f"belief {belief.statement!r} is held with none of its sources left"
    keys = [(b.subject_key, b.statement.casefold().rstrip(".")) for b in ObservationRow.objects.filter(game_save=save)]
    assert len(keys) == len(set(keys)), "two held beliefs say the same thing"


class Undo(Exception):
    pass


def state_after_rewind(manager, save, target) -> dict:
    """The snapshot a rewind to `target` gives, without keeping it (a savepoint rolled back)."""
    try:
        with transaction.atomic():
            manager.rewind(save, target)
            taken = snapshot(save)
            raise Undo
    except Undo:
        save.refresh_from_db()
    return taken


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_rewinds_around_edits_are_exact(db, data):
    world, _ = Universe.objects.get_or_create(slug="edits-prop", defaults={"name": "Edits"})
    save = Save.objects.create(universe=world, name="p", save_id=f"editprop{next(_counter)}", memory_mode="living")
    manager = CheckpointManager(vector_memory=FakeVectorMemory())
    fact_counter = itertools.count()
    snaps, last_edit = {0: snapshot(save)}, 0
    for _ in range(data.draw(st.integers(2, 7), label="steps")):
        if save.current_turn >= 2 and data.draw(st.booleans(), label="edit"):
            turn = data.draw(st.integers(1, save.current_turn - 1), label="edited turn")
            edit_turn(save, turn, new_facts=[f"fact {next(fact_counter)}"])
            last_edit = save.current_turn
            snaps = {t: s for t, s in snaps.items() if t < turn}  # the past before the edited turn still holds
            snaps[save.current_turn] = snapshot(save)
        else:
            play_turn(save, **draw_turn(data, save, fact_counter))
            snaps[save.current_turn] = snapshot(save)
        assert_every_held_belief_stands_on_stored_facts(save)

    target = data.draw(st.integers(0, save.current_turn), label="target")
    direct = state_after_rewind(manager, save, target)
    if target >= last_edit or target in snaps:
        assert direct == snaps[target]  # what the save held at that turn (after the edits it had seen)
    if target >= 1:
        earlier = data.draw(st.integers(0, target - 1), label="earlier")
        straight = state_after_rewind(manager, save, earlier)
        manager.rewind(save, target)
        assert snapshot(save) == direct
        assert_every_held_belief_stands_on_stored_facts(save)
        manager.rewind(save, earlier)
        assert snapshot(save) == straight  # N then M leaves what M leaves
        assert_every_held_belief_stands_on_stored_facts(save)
