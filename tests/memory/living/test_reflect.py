"""Reflection: subjects to re-model, prompt contents, answer cleaning."""

from __future__ import annotations

import pytest

from studio.memory.consolidate import ConsolidationAction
from studio.memory.llm import LLMTruncated
from studio.memory.observations import Observation
from studio.memory.reflect import affected_subjects, reflect, reflect_detailed, summary_schema
from tests.memory.llm.scripted import CompleteOnlyBackend, ScriptedBackend, truncated


def beliefs(n, subject="Kaël"):
    return [Observation(statement=f"Belief {i}.", subject=subject, proof_count=i + 1) for i in range(n)]


def test_affected_subjects_dedupes_and_skips_deletes():
    actions = [
        ConsolidationAction(kind="CREATE", subject="Kaël", statement="a"),
        ConsolidationAction(kind="UPDATE", subject="kaël", statement="b", observation_id=1),
        ConsolidationAction(kind="DELETE", subject="Brann", observation_id=2),
        ConsolidationAction(kind="CREATE", subject="", statement="world"),
        {"kind": "UPDATE", "subject": "Mirela"},
    ]
    assert affected_subjects(actions) == ["Kaël", "", "Mirela"]


def test_too_few_beliefs_make_no_call():
    llm = ScriptedBackend("Profile.")
    assert reflect(llm, "Kaël", beliefs(1)) == "" and reflect(llm, "Kaël", []) == ""
    assert llm.calls == []


def test_prompt_carries_subject_beliefs_and_mission():
    llm = ScriptedBackend("Kaël is a smuggler. He pays his debts.")
    summary = reflect(llm, "Kaël", beliefs(3), mission="Remembers slights.")
    assert summary == "Kaël is a smuggler. He pays his debts."
    call = llm.calls[0]
    assert call["operation"] == "reflect" and call["schema"] == summary_schema()
    assert "SUBJECT: Kaël" in call["prompt"] and "MEMORY MISSION: Remembers slights." in call["prompt"]
    assert call["prompt"].index("Belief 2.") < call["prompt"].index("Belief 0.")  # best supported first
    assert "2 to 4 sentences" in call["system"] and "only the beliefs" in call["system"]


def test_world_subject_is_named():
    llm = ScriptedBackend("The harbour is tense.")
    reflect(llm, "", beliefs(2, subject=""))
    assert "SUBJECT: the world itself" in llm.prompt


def test_answer_is_cleaned_and_capped_at_four_sentences():
    answer = '```\nSummary: "One. Two! Three? Four. Five."\n```'
    assert reflect(ScriptedBackend(answer), "Kaël", beliefs(2)) == "One. Two! Three? Four."
    assert reflect(ScriptedBackend('{"summary": "From JSON."}'), "Kaël", beliefs(2)) == "From JSON."


def test_failures_give_empty_summary_with_reason():
    summary, error = reflect_detailed(ScriptedBackend("   "), "Kaël", beliefs(2))
    assert summary == "" and error is not None
    assert reflect(ScriptedBackend(error=TimeoutError("slow")), "Kaël", beliefs(2)) == ""


def test_the_player_character_is_named_in_the_prompt():
    llm = ScriptedBackend('{"summary": "Kaël owes Wren."}')
    reflect(llm, "Kaël", beliefs(2), player_character="Wren Halloway")
    assert 'PLAYER CHARACTER: Wren Halloway (the "you" of the story).' in llm.prompt
    llm = ScriptedBackend('{"summary": "Wren dives."}')
    reflect(llm, "wren halloway", beliefs(2, subject="Wren Halloway"), player_character="Wren Halloway")
    assert 'SUBJECT: wren halloway (the player character, the "you" of the story)' in llm.prompt
    assert "PLAYER CHARACTER:" not in llm.prompt


def test_a_profile_in_the_second_person_is_rewritten_about_the_player():
    answer = '{"summary": "You are an apprentice diver. You owe Corvin Tull forty tallies."}'
    summary = reflect(ScriptedBackend(answer), "Wren", beliefs(2, "Wren"), player_character="Wren")
    assert summary == "Wren is an apprentice diver. Wren owes Corvin Tull forty tallies."


@pytest.mark.parametrize(
    "answer",
    [
        '{"summary": ["Kaël is a smuggler.", "He pays his debts."]}',
        '```json\n{"summary": "Kaël is a smuggler. He pays his debts."}\n```',
        "Kaël is a smuggler. He pays his debts.",
        '{"profile": "Kaël is a smuggler. He pays his debts."}',
    ],
)
def test_answer_shapes(answer):
    assert reflect(ScriptedBackend(answer), "Kaël", beliefs(2)) == "Kaël is a smuggler. He pays his debts."


def test_a_truncated_profile_keeps_its_complete_sentences():
    cut = '{"summary": "Kaël is a smuggler. He pays his debts. He fears the'
    assert reflect(ScriptedBackend(cut), "Kaël", beliefs(2)) == "Kaël is a smuggler. He pays his debts."
    prose = "Kaël is a smuggler. He pays his debts. He fears the"
    assert reflect(ScriptedBackend(truncated(prose)), "Kaël", beliefs(2)) == "Kaël is a smuggler. He pays his debts."
    assert reflect(ScriptedBackend(prose), "Kaël", beliefs(2)) == prose  # not cut: kept whole


def test_a_profile_cut_before_one_sentence_names_the_limit():
    summary, error = reflect_detailed(ScriptedBackend(truncated('{"summary": "Kaël is a', 32)), "Kaël", beliefs(2))
    assert summary == "" and isinstance(error, LLMTruncated) and "AXIOM_LLM_MAX_TOKENS_REFLECT" in str(error)


def test_a_backend_with_only_complete_still_works():
    llm = CompleteOnlyBackend("Kaël is a smuggler.")
    assert reflect(llm, "Kaël", beliefs(2)) == "Kaël is a smuggler."
    assert llm.calls[0]["operation"] == "reflect"
