"""The one runner of the living modules' LLM operations (`studio.memory.llm.operation`).

Ask, parse, name a truncation, never raise: written once, used by extract, consolidate and
reflect (the engine functions around them keep their contract, see the seed check).
"""

from __future__ import annotations

import pytest

from studio.memory import consolidate, factextract, reflect
from studio.memory.facts import Fact
from studio.memory.llm import LLMTruncated, LLMUnavailable
from studio.memory.llm.operation import Operation, Request, run_operation
from studio.memory.observations import Observation
from tests.memory.llm.scripted import ScriptedBackend, truncated

ECHO = Operation(name="echo", system="Answer.", item="word", activity="echoing")


def words(response) -> list[str]:
    found = response.text.split()
    if not found:
        raise ValueError("no word in the answer")
    return found


def request(prompt="Say something.") -> Request[list[str]]:
    return Request(prompt=prompt, schema={"type": "object"}, parse=words)


def test_the_answer_is_asked_under_the_operations_name_and_parsed():
    llm = ScriptedBackend("two words")
    assert run_operation(llm, ECHO, request, empty=[]) == (["two", "words"], None)
    call = llm.calls[0]
    assert (call["system"], call["prompt"], call["operation"], call["schema"]) == (
        "Answer.",
        "Say something.",
        "echo",
        {"type": "object"},
    )


def test_an_unreadable_answer_gives_the_empty_result_and_the_parsers_error():
    result, failure = run_operation(ScriptedBackend("   "), ECHO, request, empty=[])
    assert result == [] and isinstance(failure, ValueError) and "no word" in str(failure)


def test_an_answer_cut_by_the_token_limit_names_the_operations_setting():
    result, failure = run_operation(ScriptedBackend(truncated("", max_tokens=32)), ECHO, request, empty=[])
    assert result == [] and isinstance(failure, LLMTruncated)
    assert str(failure) == (
        "echo: the answer hit the token limit (32 tokens) before one complete word; "
        "raise AXIOM_LLM_MAX_TOKENS_ECHO (or AXIOM_LLM_MAX_TOKENS)"
    )


def test_a_parsers_own_truncation_is_named_the_same_way_even_when_the_answer_was_not_cut():
    def cut(response):
        raise LLMTruncated("cut before the first word")

    result, failure = run_operation(
        ScriptedBackend("x"), ECHO, lambda: Request(prompt="p", schema={}, parse=cut), empty=()
    )
    assert result == () and isinstance(failure, LLMTruncated) and "AXIOM_LLM_MAX_TOKENS_ECHO" in str(failure)


def test_nothing_raises_not_the_backend_nor_building_the_request():
    down = LLMUnavailable("down")
    assert run_operation(ScriptedBackend(error=down), ECHO, request, empty=[]) == ([], down)
    broken = KeyError("prompt")

    def unbuildable():
        raise broken

    llm = ScriptedBackend("never asked")
    assert run_operation(llm, ECHO, unbuildable, empty="") == ("", broken) and llm.calls == []


def beliefs(n):
    return [
        Observation(observation_id=i, subject="Kaël", statement=f"Kaël owes debt {i}.", proof_count=1)
        for i in range(1, n + 1)
    ]


@pytest.mark.parametrize(
    ("call", "operation", "empty"),
    [
        (lambda llm: factextract.extract_facts_detailed(llm, "Kaël pays Mira."), "extract", []),
        (lambda llm: consolidate.consolidate_detailed(llm, [Fact(statement="Kaël pays Mira.")], []), "consolidate", []),
        (lambda llm: reflect.reflect_detailed(llm, "Kaël", beliefs(2)), "reflect", ""),
    ],
)
def test_extract_consolidate_and_reflect_run_through_the_runner(monkeypatch, call, operation, empty):
    seen = []
    real = run_operation

    def spy(llm, op, build, **kwargs):
        seen.append(op.name)
        return real(llm, op, build, **kwargs)

    module = {"extract": factextract, "consolidate": consolidate, "reflect": reflect}[operation]
    monkeypatch.setattr(module, "run_operation", spy)
    result, failure = call(ScriptedBackend(truncated("", max_tokens=8)))
    assert seen == [operation] and result == empty
    assert f"AXIOM_LLM_MAX_TOKENS_{operation.upper()}" in str(failure)
