"""Character-held beliefs (holder fixed at creation) and the refusal of mission restatements."""
from __future__ import annotations

import pytest

from studio.memory.consolidate import ConsolidationAction
from studio.memory.facts import Fact, insert_facts
from studio.memory.knowledge.beliefs import assign_holders, drop_mission_restatements, restates_mission
from studio.memory.models import Observation
from studio.memory.observations import apply_consolidation
from studio.saves.services import turn_append

MISSION = ("The Reach remembers debts: who owes whom, which oaths sworn over water were kept or broken, and who "
           "came back for whom when the tide rose.")


def test_the_demo_saves_mission_restatement_is_refused_and_real_beliefs_are_not():
    restated = ("Wren Halloway: Wren Halloway remembers debts: who owes whom, which oaths sworn over water were "
                "kept or broken")
    assert restates_mission(restated, [MISSION]) == MISSION
    for statement in ("The kettle is cold.", "Pim touches the silver reliquary reverently.",
                      "The Copper Hood is a special instrument used by the Choir to keep track of their rounds."):
        assert restates_mission(statement, [MISSION]) == ""
    actions = [ConsolidationAction(kind="CREATE", statement=restated, subject="Wren Halloway"),
               ConsolidationAction(kind="CREATE", statement="Kael owes Ivo forty crowns.", subject="Kael")]
    assert [a.statement for a in drop_mission_restatements(actions, mission=MISSION, missions={})] == [
        "Kael owes Ivo forty crowns."]


@pytest.mark.django_db
def test_a_belief_is_held_by_its_subject_only_when_they_know_every_source(living, no_runner):
    turn_append(game_save=living, player_input="a", narrative="a", state={"present": ["Mira"]})
    (seen,) = insert_facts(living.save_id, 1, [Fact("Mira saw the ship sink.", entities=["Mira"])])
    turn_append(game_save=living, player_input="b", narrative="b", state={"present": ["Kael"]})
    (unseen,) = insert_facts(living.save_id, 2, [Fact("Kael sold Mira's ship.", entities=["Mira", "Kael"])])
    apply_consolidation(living.save_id, 2, [
        {"kind": "CREATE", "statement": "Mira mourns her ship.", "subject": "Mira", "source_fact_ids": [seen]},
        {"kind": "CREATE", "statement": "Mira was betrayed by Kael.", "subject": "Mira", "source_fact_ids": [unseen]},
        {"kind": "CREATE", "statement": "Kael is a cheat.", "subject": "Kael", "source_fact_ids": [unseen]},
    ], {seen: 1, unseen: 2})
    assert assign_holders(living, 2, missions={"mira": "Remembers loss."}) == 1
    holders = dict(Observation.objects.filter(game_save=living).values_list("statement", "holder"))
    assert holders == {"Mira mourns her ship.": "Mira", "Mira was betrayed by Kael.": "", "Kael is a cheat.": ""}
