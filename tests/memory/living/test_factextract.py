"""Fact extraction: prompt contents and robust parsing, against a scripted backend.

The answers in tests/memory/fixtures/real_answers/ are the shapes real small models gave
(issue 13): hand-written reproductions unless their `provenance` says "recorded".
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from studio.memory.factextract import SYSTEM_PROMPT, extract_facts, extract_facts_detailed, fact_schema, parse_facts
from studio.memory.llm import LLMTruncated, LLMUnavailable
from studio.memory.llm.normalise import is_placeholder, statement_key
from tests.memory.llm.scripted import CompleteOnlyBackend, ScriptedBackend, truncated

FIXTURES = Path(__file__).parent / "fixtures" / "real_answers"
DEMO = Path(__file__).resolve().parents[3] / "studio" / "universes" / "demo" / "universe.json"


def demo_names() -> list[str]:
    """The demo universe's lore titles and aliases: what the pipeline offers as known entities."""
    names: list[str] = []
    for entry in json.loads(DEMO.read_text())["lore"]:
        for name in [entry["title"], *(entry.get("keys") or [])]:
            if name and name.casefold() not in {n.casefold() for n in names}:
                names.append(name)
    return names[:60]


TWO = json.dumps(
    {
        "facts": [
            {
                "statement": "kael paid the harbour master.",
                "fact_type": "event",
                "who": "kael",
                "entities": ["kael", "port vey"],
            },
            {
                "statement": "The Guild controls the docks.",
                "fact_type": "world",
                "entities": ["The Guild"],
                "when": "at dawn",
            },
        ]
    }
)


def test_extracts_structured_facts_and_canonical_names():
    llm = ScriptedBackend(TWO)
    facts = extract_facts(llm, "Kaël pays.", known_entities=["Kaël", "Port Vey"], when_hint="Day 3")
    assert [f.statement for f in facts] == ["kael paid the harbour master.", "The Guild controls the docks."]
    assert facts[0].entities == ["Kaël", "Port Vey"]  # mapped onto the known spelling
    assert facts[0].fact_type == "event" and facts[0].who == "Kaël"
    assert facts[0].when == "Day 3"  # no time stated: the hint
    assert facts[1].when == "at dawn"  # a stated time wins
    assert all(f.fact_id is None and f.turn_id is None for f in facts)


def test_prompt_carries_entities_hint_cap_and_rules():
    llm = ScriptedBackend('{"facts": []}')
    extract_facts(
        llm, "The rain falls on Port Vey.", known_entities=["Kaël", "Port Vey"], when_hint="Day 3", max_facts=5
    )
    call = llm.calls[0]
    assert call["operation"] == "extract" and call["json_mode"] is True
    assert call["schema"] == fact_schema(5)
    assert call["schema"]["properties"]["facts"]["maxItems"] == 5
    assert "Known entities (use these exact names): Kaël; Port Vey" in call["prompt"]
    assert "Story time of this passage: Day 3." in call["prompt"]
    assert "at most 5 facts" in call["prompt"]
    assert "The rain falls on Port Vey." in call["prompt"]
    assert "player character" not in call["prompt"]  # none given: nothing said about "you"
    for rule in ("No speculation", "Atomic", "Self-contained", "Never write the same fact twice", '"your location"'):
        assert rule in call["system"]
    assert call["system"] == SYSTEM_PROMPT


def test_the_prompt_says_who_you_is():
    llm = ScriptedBackend('{"facts": []}')
    extract_facts(llm, "You unfold the note.", player_character="Wren Halloway")
    assert 'The player character is Wren Halloway. "You" and "your" in the passage mean Wren Halloway' in llm.prompt


def test_the_prompt_example_is_valid_against_the_schema_and_is_never_stored():
    import jsonschema

    example = SYSTEM_PROMPT.split("Answer: ", 1)[1].split("\n", 1)[0]
    jsonschema.validate(json.loads(example), fact_schema(8))
    answer = json.loads(example)
    answer["facts"].append({"statement": "Pim took the pie."})
    facts = extract_facts(ScriptedBackend(json.dumps(answer)), "text")
    assert [f.statement for f in facts] == ["Pim took the pie."]  # the copied example facts are dropped


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
    answer = json.dumps(
        {
            "facts": [
                {"statement": "A."},
                "junk",
                {"who": "no statement"},
                {"statement": " "},
                {"statement": "B.", "fact_type": "nonsense", "entities": "X, Y"},
            ]
        }
    )
    facts = extract_facts(ScriptedBackend(answer), "text")
    assert [f.statement for f in facts] == ["A.", "B."]
    assert facts[1].fact_type == "world" and facts[1].entities == ["X", "Y"]


def test_truncated_answer_keeps_complete_items():
    answer = '{"facts": [{"statement": "A."}, {"statement": "B."}, {"statement": "C is cut'
    assert [f.statement for f in extract_facts(ScriptedBackend(answer), "text")] == ["A.", "B."]
    facts, error = extract_facts_detailed(ScriptedBackend(truncated(answer)), "text")
    assert [f.statement for f in facts] == ["A.", "B."] and error is None


def test_truncated_before_the_first_fact_names_the_limit_to_raise():
    facts, error = extract_facts_detailed(ScriptedBackend(truncated('{"facts": [{"statement": "A is', 96)), "text")
    assert facts == [] and isinstance(error, LLMTruncated) and not error.retryable
    assert "96 tokens" in str(error) and "AXIOM_LLM_MAX_TOKENS_EXTRACT" in str(error)
    # a cut answer from a backend that reports nothing is recognised from the text itself
    facts, error = extract_facts_detailed(ScriptedBackend('```json\n{"facts": [{"statement": "A is'), "text")
    assert isinstance(error, LLMTruncated)


def test_a_backend_with_only_complete_still_works():
    llm = CompleteOnlyBackend('{"facts": [{"statement": "A.", "who": "you"}]}')
    facts = extract_facts(llm, "You act.", player_character="Wren")
    assert [(f.statement, f.who) for f in facts] == [("A.", "Wren")]
    assert llm.calls[0]["json_mode"] is True


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


# -- the real failure shapes of issue 13 ----------------------------------------------------------


def fixtures() -> list[Path]:
    return sorted(FIXTURES.glob("*.json"))


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def parsed(fixture: dict):
    return parse_facts(
        fixture["answer"],
        known_entities=demo_names(),
        when_hint=fixture.get("when_hint"),
        player_character=fixture.get("player_character"),
    )


def test_the_fixtures_say_where_they_come_from():
    assert len(fixtures()) >= 6
    for path in fixtures():
        fixture = load(path)
        assert fixture["provenance"] in ("hand-written", "recorded"), path.name
        if fixture["provenance"] == "hand-written":
            assert "Not a recording" in fixture["note"], path.name
        else:
            assert fixture["model"] and fixture["recorded_on"], path.name


@pytest.mark.parametrize("path", fixtures(), ids=lambda p: p.stem)
def test_real_answer_shapes_give_clean_facts(path):
    fixture = load(path)
    facts = parsed(fixture)
    assert facts, "every one of these answers holds facts worth keeping"
    pc = fixture.get("player_character") or ""
    keys = [statement_key(f.statement) for f in facts]
    assert len(keys) == len(set(keys)), "repeated facts are dropped"
    for fact in facts:
        for name in fact.entities + [n.strip() for n in fact.who.split(",") if n.strip()]:
            assert not is_placeholder(name, "who"), (name, fact)
            assert name.casefold() != "you"
        assert not fact.where or not is_placeholder(fact.where, "where"), fact
        assert not fact.when or not is_placeholder(fact.when, "when"), fact
        assert fact.when, "a time is always there: stated, or the hint"
        if pc:
            assert not fact.statement.lower().startswith(("you ", "your ")), fact
            assert " you " not in f" {fact.statement.lower()} ", fact
        for field in ("who", "what", "when", "where", "why", "statement"):
            assert isinstance(getattr(fact, field), str)
    expect = fixture.get("expect") or {}
    if "statements" in expect:
        assert [f.statement for f in facts] == expect["statements"]
    for field in ("who", "what", "when", "where", "entities"):
        if field in expect:
            assert [getattr(f, field) for f in facts] == expect[field], field


def test_the_cut_fenced_answer_counts_as_truncated_and_keeps_its_complete_facts():
    fixture = load(FIXTURES / "issue13_fenced_cut_mid_string.json")
    assert fixture["finish_reason"] == "length"
    facts, error = extract_facts_detailed(
        ScriptedBackend(truncated(fixture["answer"], 300)), "passage", player_character="Wren Halloway"
    )
    assert error is None and len(facts) == 2
