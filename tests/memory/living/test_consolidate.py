"""Consolidation: missions and existing beliefs in the prompt, and action parsing."""

from __future__ import annotations

import json

from studio.memory.consolidate import (
    ConsolidationAction,
    action_schema,
    consolidate,
    consolidate_detailed,
    scope_existing,
)
from studio.memory.facts import Fact
from studio.memory.llm import LLMTruncated
from studio.memory.observations import Observation
from tests.memory.llm.scripted import ScriptedBackend, truncated


def facts():
    return [
        Fact(statement="Kaël paid Brann.", who="Kaël", entities=["Kaël", "Brann"], fact_id=101),
        Fact(statement="The docks burned.", entities=["Port Vey"], fact_id=102),
    ]


def belief(oid, subject, statement, turn=1):
    return Observation(statement=statement, subject=subject, observation_id=oid, updated_turn_id=turn, proof_count=1)


def test_prompt_has_mission_and_only_batch_missions():
    llm = ScriptedBackend('{"actions": []}')
    consolidate(
        llm,
        facts(),
        [],
        mission="Remember debts.",
        missions={"kaël": "Remembers slights.", "Mirela": "Remembers prices.", "Brann": ""},
    )
    prompt = llm.prompt
    assert "WORLD MEMORY MISSION: Remember debts." in prompt
    assert "- kaël: Remembers slights." in prompt
    assert "Mirela" not in prompt and "- Brann" not in prompt
    assert "[101] Kaël paid Brann. (who: Kaël; entities: Kaël, Brann)" in prompt
    assert "EXISTING BELIEFS: none yet." in prompt
    assert llm.calls[0]["operation"] == "consolidate" and llm.calls[0]["json_mode"]
    assert llm.calls[0]["schema"] == action_schema()
    assert "PLAYER CHARACTER" not in prompt
    for rule in ("Prefer UPDATE", "One facet per belief", "DELETE only", "Never do arithmetic", "say so"):
        assert rule in llm.calls[0]["system"]


def test_existing_beliefs_are_scoped_to_batch_characters_then_recent():
    existing = [belief(i, "Nobody", f"Old {i}.", turn=i) for i in range(1, 31)]
    existing.append(belief(99, "Brann", "Brann lends money.", turn=0))
    shown = scope_existing(existing, ["Kaël", "Brann"], 5)
    assert [o.observation_id for o in shown] == [99, 30, 29, 28, 27]
    llm = ScriptedBackend('{"actions": []}')
    consolidate(llm, facts(), existing, max_existing=5)
    assert "[99] Brann: Brann lends money." in llm.prompt
    assert "[26]" not in llm.prompt and "[30]" in llm.prompt
    assert len(scope_existing(existing, [], 0)) == 31  # <= 0 disables the cap


def test_stale_beliefs_are_flagged_for_re_examination():
    stale = belief(7, "Kaël", "Kaël owes Brann.")
    stale.stale = True
    llm = ScriptedBackend('{"actions": []}')
    consolidate(llm, facts(), [stale])
    assert "[7] Kaël: Kaël owes Brann., 1 supporting facts, STALE" in llm.prompt


def test_parses_actions_and_drops_invalid_ones():
    answer = json.dumps(
        {
            "actions": [
                {
                    "action": "create",
                    "subject": "Kaël",
                    "statement": "Kaël pays his debts.",
                    "source_fact_ids": [101, "102", 555],
                },
                {
                    "action": "UPDATE",
                    "observation_id": 7,
                    "statement": "Kaël no longer owes Brann.",
                    "source_fact_ids": [101],
                },
                {"action": "UPDATE", "observation_id": 8, "statement": "hallucinated belief id"},
                {"action": "DELETE", "observation_id": "7"},
                {"action": "UPDATE", "observation_id": 7, "statement": ""},
                {"action": "MERGE", "statement": "unknown kind"},
                {"action": "CREATE", "statement": ""},
                "junk",
            ]
        }
    )
    actions = consolidate(ScriptedBackend(answer), facts(), [belief(7, "Kaël", "Kaël owes Brann.")])
    assert actions == [
        ConsolidationAction(
            kind="CREATE", statement="Kaël pays his debts.", subject="Kaël", source_fact_ids=[101, 102]
        ),
        ConsolidationAction(
            kind="UPDATE", statement="Kaël no longer owes Brann.", observation_id=7, source_fact_ids=[101]
        ),
        ConsolidationAction(kind="DELETE", observation_id=7),
    ]


def test_facts_without_ids_are_numbered_in_the_prompt():
    batch = [Fact(statement="A."), Fact(statement="B.")]
    llm = ScriptedBackend(
        '```json\n{"actions": [{"action": "CREATE", "statement": "S.", "source_fact_ids": [2]}]}\n```'
    )
    actions = consolidate(llm, batch, [])
    assert "[1] A." in llm.prompt and "[2] B." in llm.prompt
    assert actions[0].source_fact_ids == [2] and batch[1].fact_id == 2


def test_empty_input_and_failures_give_no_actions():
    llm = ScriptedBackend('{"actions": []}')
    assert consolidate(llm, [], [belief(1, "", "x")]) == [] and llm.calls == []
    actions, error = consolidate_detailed(ScriptedBackend("no json at all"), facts(), [])
    assert actions == [] and error is not None
    assert consolidate(ScriptedBackend(error=RuntimeError("boom")), facts(), []) == []


def test_truncated_answer_keeps_complete_actions():
    answer = '{"actions": [{"action": "CREATE", "statement": "S.", "source_fact_ids": [101]}, {"action": "CRE'
    assert [a.statement for a in consolidate(ScriptedBackend(answer), facts(), [])] == ["S."]


def test_json_of_the_wrong_shape_is_an_error():
    actions, error = consolidate_detailed(ScriptedBackend('{"beliefs": "all fine"}'), facts(), [])
    assert actions == [] and error is not None
    actions, error = consolidate_detailed(ScriptedBackend('{"actions": []}'), facts(), [])
    assert actions == [] and error is None  # "no change" is a valid answer


def test_the_player_character_is_named_and_you_maps_onto_it():
    answer = json.dumps(
        {
            "actions": [
                {
                    "action": "CREATE",
                    "observation_id": 0,
                    "subject": "you",
                    "statement": "You owe Brann forty tallies.",
                    "source_fact_ids": [101],
                },
                {
                    "action": "CREATE",
                    "observation_id": 0,
                    "subject": "the environment",
                    "statement": "The docks burned.",
                    "source_fact_ids": [102],
                },
                {
                    "action": "CREATE",
                    "observation_id": 0,
                    "subject": ["brann", "Kaël"],
                    "statement": "Brann was paid.",
                    "source_fact_ids": "101, 102",
                },
            ]
        }
    )
    llm = ScriptedBackend(answer)
    actions = consolidate(llm, facts(), [], player_character="Wren Halloway")
    assert 'PLAYER CHARACTER: Wren Halloway (the "you" of the story' in llm.prompt
    assert [(a.subject, a.statement, a.source_fact_ids) for a in actions] == [
        ("Wren Halloway", "Wren Halloway owes Brann forty tallies.", [101]),
        ("", "The docks burned.", [102]),
        ("Brann", "Brann was paid.", [101, 102]),  # canonical spelling of a batch name
    ]


def test_ids_written_as_strings_are_read():
    answer = json.dumps(
        {
            "actions": [
                {
                    "action": "UPDATE",
                    "observation_id": "[7]",
                    "subject": "Kaël",
                    "statement": "Kaël paid Brann.",
                    "source_fact_ids": ["#101"],
                },
            ]
        }
    )
    (action,) = consolidate(ScriptedBackend(answer), facts(), [belief(7, "Kaël", "Kaël owes Brann.")])
    assert (action.kind, action.observation_id, action.source_fact_ids) == ("UPDATE", 7, [101])


def test_repeated_actions_and_restated_beliefs_are_dropped():
    create = {
        "action": "CREATE",
        "observation_id": 0,
        "subject": "Kaël",
        "statement": "Kaël pays his debts.",
        "source_fact_ids": [101],
    }
    update = {
        "action": "UPDATE",
        "observation_id": 7,
        "subject": "Kaël",
        "statement": "Kaël paid Brann.",
        "source_fact_ids": [101],
    }
    restated = {
        "action": "CREATE",
        "observation_id": 0,
        "subject": "kaël",
        "statement": "Kaël owes Brann",
        "source_fact_ids": [101],
    }
    answer = json.dumps(
        {"actions": [create, create, update, update, dict(create, statement="kael pays his debts"), restated]}
    )
    actions = consolidate(ScriptedBackend(answer), facts(), [belief(7, "Kaël", "Kaël owes Brann.")])
    assert [(a.kind, a.statement) for a in actions] == [
        ("CREATE", "Kaël pays his debts."),
        ("UPDATE", "Kaël paid Brann."),
    ]


def test_truncated_before_the_first_action_names_the_limit():
    actions, error = consolidate_detailed(ScriptedBackend(truncated('{"actions": [{"action": "CRE', 40)), facts(), [])
    assert actions == [] and isinstance(error, LLMTruncated) and "AXIOM_LLM_MAX_TOKENS_CONSOLIDATE" in str(error)
    answer = '{"actions": [{"action": "CREATE", "statement": "S.", "source_fact_ids": [101]}, {"action": "CRE'
    actions, error = consolidate_detailed(ScriptedBackend(truncated(answer)), facts(), [])
    assert [a.statement for a in actions] == ["S."] and error is None


def test_an_update_citing_only_facts_about_others_is_dropped():
    """The answer a 1.5B model gave on the demo: the one belief shown, about a character the
    turn never names, "updated" from a fact about someone else."""
    batch = [
        Fact(
            statement="Corvin Tull chalks the slate behind his counter.",
            who="Corvin Tull",
            entities=["Corvin Tull"],
            fact_id=1,
        ),
        Fact(statement="Hesper left her kettle cold.", who="", entities=[], fact_id=2),
        Fact(statement="The boy grins at Wren.", who="boy", entities=["boy"], fact_id=3),
    ]
    shown = [belief(1, "Hesper Vale", "Hesper Vale's kettle is cold."), belief(2, "", "The tide is low.")]
    answer = json.dumps(
        {
            "actions": [
                {
                    "action": "UPDATE",
                    "observation_id": 1,
                    "subject": "Hesper Vale",
                    "statement": "Hesper Vale's kettle is cold.",
                    "source_fact_ids": [1],
                },
                {
                    "action": "UPDATE",
                    "observation_id": 2,
                    "subject": "",
                    "statement": "The tide is very low.",
                    "source_fact_ids": [3],
                },
            ]
        }
    )
    actions = consolidate(ScriptedBackend(answer), batch, shown)
    assert [(a.kind, a.observation_id) for a in actions] == [("UPDATE", 2)]  # world beliefs take any evidence
    # A fact naming the subject, by first name in the statement, is evidence.
    answer = json.dumps(
        {
            "actions": [
                {
                    "action": "UPDATE",
                    "observation_id": 1,
                    "subject": "Hesper Vale",
                    "statement": "Hesper Vale left in a hurry.",
                    "source_fact_ids": [1, 2],
                },
            ]
        }
    )
    actions = consolidate(ScriptedBackend(answer), batch, shown)
    assert [(a.kind, a.observation_id, a.source_fact_ids) for a in actions] == [("UPDATE", 1, [1, 2])]
