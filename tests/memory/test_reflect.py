"""Reflection: subjects to re-model, prompt contents, answer cleaning."""
from __future__ import annotations

from studio.memory.consolidate import ConsolidationAction
from studio.memory.observations import Observation
from studio.memory.reflect import affected_subjects, reflect, reflect_detailed
from tests.memory.scripted import ScriptedBackend


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
    assert call["operation"] == "reflect" and call["json_mode"] is False
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
