"""Fact extraction: prompt contents and robust parsing, against a scripted backend."""
from __future__ import annotations

import json

import pytest

from studio.memory.factextract import SYSTEM_PROMPT, extract_facts, extract_facts_detailed
from studio.memory.llm import LLMUnavailable
from tests.memory.scripted import ScriptedBackend

TWO = json.dumps(
    {
        "facts": [
            {"statement": "kael paid the harbour master.", "fact_type": "event", "who": "kael",
             "entities": ["kael", "port vey"]},
            {"statement": "The Guild controls the docks.", "fact_type": "world", "entities": ["The Guild"],
             "when": "at dawn"},
        ]
    }
)


def test_extracts_structured_facts_and_canonical_names():
    llm = ScriptedBackend(TWO)
    facts = extract_facts(llm, "Kaël pays.", known_entities=["Kaël", "Port Vey"], when_hint="Day 3")
    assert [f.statement for f in facts] == ["kael paid the harbour master.", "The Guild controls the docks."]
    assert facts[0].entities == ["Kaël", "Port Vey"]  # mapped onto the known spelling
    assert facts[0].fact_type == "event" and facts[0].who == "kael"
    assert facts[0].when == "Day 3"  # no time stated: the hint
    assert facts[1].when == "at dawn"  # a stated time wins
    assert all(f.fact_id is None and f.turn_id is None for f in facts)


def test_prompt_carries_entities_hint_cap_and_rules():
    llm = ScriptedBackend('{"facts": []}')
    extract_facts(llm, "The rain falls on Port Vey.", known_entities=["Kaël", "Port Vey"], when_hint="Day 3", max_facts=5)
    call = llm.calls[0]
    assert call["operation"] == "extract" and call["json_mode"] is True
    assert "Known entities (use these exact names): Kaël; Port Vey" in call["prompt"]
    assert "Story time of this passage: Day 3." in call["prompt"]
    assert "at most 5 facts" in call["prompt"]
    assert "The rain falls on Port Vey." in call["prompt"]
    assert "No speculation" in call["system"] and "Atomic" in call["system"]
    assert call["system"] == SYSTEM_PROMPT


def test_max_facts_is_honoured():
    items = [{"statement": f"Fact {i}."} for i in range(10)]
    assert len(extract_facts(ScriptedBackend(json.dumps({"facts": items})), "text", max_facts=3)) == 3
    llm = ScriptedBackend("{}")
    assert extract_facts(llm, "text", max_facts=0) == [] and llm.calls == []


@pytest.mark.parametrize(
    "answer",
    [
        '```json\n{"facts": [{"statement": "A."}]}\n```',
        'Here are the facts:\n{"facts": [{"statement": "A."}]}\nLet me know!',
        '[{"statement": "A."}]',
        '{"statement": "A."}',
    ],
)
def test_tolerates_fences_prose_and_shapes(answer):
    assert [f.statement for f in extract_facts(ScriptedBackend(answer), "text")] == ["A."]


def test_partly_valid_list_keeps_valid_items():
    answer = json.dumps({"facts": [{"statement": "A."}, "junk", {"who": "no statement"}, {"statement": " "},
                                   {"statement": "B.", "fact_type": "nonsense", "entities": "X, Y"}]})
    facts = extract_facts(ScriptedBackend(answer), "text")
    assert [f.statement for f in facts] == ["A.", "B."]
    assert facts[1].fact_type == "world" and facts[1].entities == ["X", "Y"]


def test_truncated_answer_keeps_complete_items():
    answer = '{"facts": [{"statement": "A."}, {"statement": "B."}, {"statement": "C is cut'
    assert [f.statement for f in extract_facts(ScriptedBackend(answer), "text")] == ["A.", "B."]


@pytest.mark.parametrize("answer", ["", "I cannot help with that.", '{"something": "else"}', "[1, 2]"])
def test_garbage_gives_no_facts_and_a_reason(answer):
    facts, error = extract_facts_detailed(ScriptedBackend(answer), "text")
    assert facts == []
    if answer != "[1, 2]":
        assert error is not None
    assert extract_facts(ScriptedBackend(answer), "text") == []


def test_backend_failure_never_raises():
    facts, error = extract_facts_detailed(ScriptedBackend(error=LLMUnavailable("down")), "text")
    assert facts == [] and isinstance(error, LLMUnavailable)


def test_empty_input_makes_no_call():
    llm = ScriptedBackend(TWO)
    assert extract_facts(llm, "   ") == [] and extract_facts(llm, "") == []
    assert llm.calls == []


def test_who_fills_entities_when_missing():
    facts = extract_facts(ScriptedBackend('{"facts": [{"statement": "A.", "who": "Kaël, Mirela"}]}'), "t")
    assert facts[0].entities == ["Kaël", "Mirela"]
