"""Character-held beliefs (holder judged at each write, given back by a rewind) and the refusal of mission restatements."""

from __future__ import annotations

import pytest

from studio.memory.consolidate import ConsolidationAction
from studio.memory.facts import Fact, insert_facts
from studio.memory.knowledge.beliefs import assign_holders, drop_mission_restatements, restates_mission
from studio.memory.models import Observation
from studio.memory.observations import apply_consolidation
from studio.saves.services import turn_append

MISSION = (
    "The Reach remembers debts: who owes whom, which oaths sworn over water were kept or broken, and who "
    "came back for whom when the tide rose."
)


def test_the_demo_saves_mission_restatement_is_refused_and_real_beliefs_are_not():
    restated = (
        "Wren Halloway: Wren Halloway remembers debts: who owes whom, which oaths sworn over water were kept or broken"
    )
    assert restates_mission(restated, [MISSION]) == MISSION
    for statement in (
        "The kettle is cold.",
        "Pim touches the silver reliquary reverently.",
        "The Copper Hood is a special instrument used by the Choir to keep track of their rounds.",
    ):
        assert restates_mission(statement, [MISSION]) == ""
    actions = [
        ConsolidationAction(kind="CREATE", statement=restated, subject="Wren Halloway"),
        ConsolidationAction(kind="CREATE", statement="Kael owes Ivo forty crowns.", subject="Kael"),
    ]
    assert [a.statement for a in drop_mission_restatements(actions, mission=MISSION, missions={})] == [
        "Kael owes Ivo forty crowns."
    ]


@pytest.mark.django_db
def test_a_belief_is_held_by_its_subject_only_when_they_know_every_source(living, no_runner):
    turn_append(game_save=living, player_input="a", narrative="a", state={"present": ["Mira"]})
    (seen,) = insert_facts(living.save_id, 1, [Fact("Mira saw the ship sink.", entities=["Mira"])])
    turn_append(game_save=living, player_input="b", narrative="b", state={"present": ["Kael"]})
    (unseen,) = insert_facts(living.save_id, 2, [Fact("Kael sold Mira's ship.", entities=["Mira", "Kael"])])
    apply_consolidation(
        living.save_id,
        2,
        [
            {"kind": "CREATE", "statement": "Mira mourns her ship.", "subject": "Mira", "source_fact_ids": [seen]},
            {
                "kind": "CREATE",
                "statement": "Mira was betrayed by Kael.",
                "subject": "Mira",
                "source_fact_ids": [unseen],
            },
            {"kind": "CREATE", "statement": "Kael is a cheat.", "subject": "Kael", "source_fact_ids": [unseen]},
        ],
        {seen: 1, unseen: 2},
    )
    assert assign_holders(living, 2, missions={"mira": "Remembers loss."}) == 1
    holders = dict(Observation.objects.filter(game_save=living).values_list("statement", "holder"))
    assert holders == {"Mira mourns her ship.": "Mira", "Mira was betrayed by Kael.": "", "Kael is a cheat.": ""}


@pytest.mark.django_db
@pytest.mark.parametrize("trail_records_holders", [True, False], ids=["new", "from-before-the-trail-held-holders"])
def test_an_update_judges_the_holder_again_and_a_rewind_or_fork_gives_back_the_holder_at_n(
    living, no_runner, trail_records_holders
):
    from studio.saves.checkpoints import CheckpointManager
    from tests.fakes import FakeVectorMemory

    missions = {"mira": "Remembers loss."}
    turn_append(game_save=living, player_input="a", narrative="a", state={"present": ["Mira"]})
    (seen,) = insert_facts(living.save_id, 1, [Fact("Mira saw the ship sink.", entities=["Mira"])])
    apply_consolidation(
        living.save_id,
        1,
        [
            {"kind": "CREATE", "statement": "Mira mourns her ship.", "subject": "Mira", "source_fact_ids": [seen]},
            {"kind": "CREATE", "statement": "The ship is lost.", "subject": "Kael", "source_fact_ids": [seen]},
        ],
        {seen: 1},
    )
    assign_holders(living, 1, missions=missions)
    if not trail_records_holders:  # a belief written when the holder was fixed at creation
        for belief in Observation.objects.filter(game_save=living):
            Observation.objects.filter(pk=belief.pk).update(
                history=[{k: v for k, v in h.items() if k != "holder"} for h in belief.history]
            )
    mourns = Observation.objects.get(game_save=living, statement="Mira mourns her ship.")
    lost = Observation.objects.get(game_save=living, statement="The ship is lost.")
    turn_append(game_save=living, player_input="b", narrative="b", state={"present": ["Kael"]})
    (unseen,) = insert_facts(living.save_id, 2, [Fact("Kael sold Mira's ship.", entities=["Mira", "Kael"])])
    apply_consolidation(
        living.save_id,
        2,
        [
            # Mira's belief now rests on a fact she did not witness: it is no longer hers alone to hold.
            {
                "kind": "UPDATE",
                "observation_id": mourns.pk,
                "statement": "Mira mourns the ship Kael sold.",
                "subject": "Mira",
                "source_fact_ids": [unseen],
            },
            # The world's belief becomes one about Mira, from a fact she witnessed: hers.
            {
                "kind": "UPDATE",
                "observation_id": lost.pk,
                "statement": "Mira knows the ship is lost.",
                "subject": "Mira",
                "source_fact_ids": [],
            },
        ],
        {unseen: 2},
    )
    assign_holders(living, 2, missions=missions)
    assert [Observation.objects.get(pk=pk).holder for pk in (mourns.pk, lost.pk)] == ["", "Mira"]
    manager = CheckpointManager(vector_memory=FakeVectorMemory())
    fork = manager.fork(living, 1)
    assert sorted(Observation.objects.filter(game_save=fork).values_list("statement", "holder")) == [
        ("Mira mourns her ship.", "Mira"),
        ("The ship is lost.", ""),
    ]
    manager.rewind(living, 1)
    assert [Observation.objects.get(pk=pk).holder for pk in (mourns.pk, lost.pk)] == ["Mira", ""]


@pytest.mark.django_db
def test_holders_are_written_in_one_statement_and_a_job_run_again_writes_nothing(living, no_runner):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    turn_append(game_save=living, player_input="a", narrative="a", state={"present": ["Mira"]})
    (seen,) = insert_facts(living.save_id, 1, [Fact("Mira saw the ship sink.", entities=["Mira"])])
    apply_consolidation(
        living.save_id,
        1,
        [
            {"kind": "CREATE", "statement": f"Mira remembers wreck {n}.", "subject": "Mira", "source_fact_ids": [seen]}
            for n in range(5)
        ],
        {seen: 1},
    )

    def updates():
        with CaptureQueriesContext(connection) as queries:
            held = assign_holders(living, 1, missions={"mira": "Remembers loss."})
        return held, sum(q["sql"].lstrip().upper().startswith("UPDATE") for q in queries.captured_queries)

    assert updates() == (5, 1)  # five beliefs judged, one UPDATE statement
    history = {pk: h for pk, h in Observation.objects.filter(game_save=living).values_list("pk", "history")}
    assert updates() == (5, 0)  # the same judgement again: nothing written
    assert dict(Observation.objects.filter(game_save=living).values_list("pk", "history")) == history
