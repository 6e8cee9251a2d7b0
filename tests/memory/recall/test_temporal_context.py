"""Named time in the narrator's context: facts and beliefs from the time the action names come first.

A living save of twelve turns, four in each of April, May and June 2023 (the turn state's
`date`, LoCoMo's format), three facts naming Mira a turn: without a named time the twelve
most recent facts are June's. Asked about May, May's facts come first and say why, and
nothing the plain context held is dropped. Facts print their story time once, as a heading.
"""

from __future__ import annotations

from dataclasses import asdict

import pytest

from studio.memory.facts import get_facts, get_facts_in_turns
from studio.memory.models import Fact, Observation
from studio.memory.recall import temporal
from studio.memory.recall.context import build_memory_context
from studio.memory.recall.allocate import assemble
from studio.memory.recall.policy import DEFAULT_POLICY
from studio.world.models import Event, MemoryMode, Save, StateCache

MAX_BELIEFS_PER_SUBJECT, MAX_FACTS = DEFAULT_POLICY.max_beliefs_per_subject, DEFAULT_POLICY.max_facts

pytestmark = pytest.mark.django_db

MONTHS = {1: "April", 2: "May", 3: "June"}
MAY = {5, 6, 7, 8}


def date_of(turn: int) -> str:
    return f"7:00 pm on {(turn - 1) % 4 + 10} {MONTHS[(turn - 1) // 4 + 1]}, 2023"


@pytest.fixture
def dated_living(universe, vector_memory):
    game_save = Save.objects.create(
        universe=universe, name="Dated", save_id="datedliving01", memory_mode=MemoryMode.LIVING, current_turn=12
    )
    for turn in range(1, 13):
        Event.objects.create(
            game_save=game_save, turn_id=turn, player_input="", narrative=f"Mira waits by the well ({turn})."
        )
        StateCache.objects.create(
            game_save=game_save, turn_id=turn, state={"date": date_of(turn), "location": "harbour"}
        )
        for n in range(3):
            Fact.objects.create(
                game_save=game_save, turn_id=turn, statement=f"Mira does thing {turn}.{n}.", entities=["Mira"]
            )
    vector_memory.embed_chunks(
        game_save.save_id, [{"turn_id": t, "text": f"Mira waits by the well ({t})."} for t in range(1, 13)]
    )
    return game_save


def facts_of(context) -> list:
    return [i for i in context.items if i.layer == "fact" and i.included]


def test_facts_of_the_named_time_come_first_and_say_so(dated_living):
    context = build_memory_context(
        game_save=dated_living, query_text="What did Mira do in May 2023?", focus_terms=["Mira"], token_budget=4000
    )
    facts = facts_of(context)
    lifted = [f for f in facts if f.why.get("named_time")]
    assert {f.ref["turn_id"] for f in lifted} == MAY and len(lifted) == MAX_FACTS  # May holds exactly 12 of them
    assert facts[: len(lifted)] == lifted  # first, most recent first
    assert [f.ref["turn_id"] for f in lifted] == sorted((f.ref["turn_id"] for f in lifted), reverse=True)
    assert lifted[0].why["named_time"] == (
        "lifted by the named time May 2023 (1 May 2023 – 31 May 2023): turn 8 lies inside it"
    )
    assert lifted[0].reason.endswith(
        "; lifted by the named time May 2023 (1 May 2023 – 31 May 2023): turn 8 lies inside it"
    )
    assert all(f.included for f in lifted)
    # Without the named time none of May's facts is among the twelve most recent.
    plain = build_memory_context(
        game_save=dated_living, query_text="What did Mira do by the well?", focus_terms=["Mira"], token_budget=4000
    )
    assert not {f.ref["turn_id"] for f in facts_of(plain)} & MAY


def test_a_named_time_drops_no_fact_the_plain_context_offers(dated_living):
    timed = facts_of(build_memory_context(game_save=dated_living, query_text="Mira in May 2023", focus_terms=["Mira"]))
    plain = facts_of(build_memory_context(game_save=dated_living, query_text="Mira", focus_terms=["Mira"]))
    rest = [f.ref["fact_id"] for f in timed if not f.why.get("named_time")]
    assert rest == [f.ref["fact_id"] for f in plain]  # all of them, in their order, after the lifted ones


def test_a_query_naming_no_time_reads_no_story_time_and_ranks_as_before(dated_living, monkeypatch):
    reads = []
    monkeypatch.setattr(temporal, "turn_story_points", lambda **kwargs: reads.append(kwargs) or {})
    Observation.objects.create(
        game_save=dated_living,
        statement="Mira is patient.",
        subject="Mira",
        sources=[{"fact_id": 1, "turn_id": 5}, {"fact_id": 2, "turn_id": 6}],
    )
    context = build_memory_context(
        game_save=dated_living, query_text="What did Mira do by the well?", focus_terms=["Mira"], token_budget=4000
    )
    assert reads == []
    recent = get_facts(dated_living.save_id, entity="Mira", limit=MAX_FACTS, max_turn_id=12)
    assert [f.ref["fact_id"] for f in facts_of(context)] == [fact.fact_id for fact in recent]
    assert not any("named_time" in i.why for i in context.items if i.layer in ("fact", "belief"))
    assert not any(n.startswith("Named time") for n in context.notes)


def test_one_story_time_read_serves_every_layer(dated_living, monkeypatch):
    reads = []
    real = temporal.turn_story_points
    monkeypatch.setattr(temporal, "turn_story_points", lambda **kwargs: reads.append(kwargs) or real(**kwargs))
    Observation.objects.create(
        game_save=dated_living,
        statement="Mira hid the key in May.",
        subject="Mira",
        sources=[{"fact_id": 1, "turn_id": 6}],
    )
    context = build_memory_context(
        game_save=dated_living, query_text="What did Mira do in May 2023?", focus_terms=["Mira"]
    )
    assert len(reads) == 1
    assert (
        "Named time: May 2023 (1 May 2023 – 31 May 2023) → turns 5-8 preferred." in context.notes
    )  # the narrative arm
    assert any(i.why.get("named_time") for i in context.items if i.layer == "belief")
    assert any(i.why.get("named_time") for i in context.items if i.layer == "fact")


def test_beliefs_whose_evidence_is_mostly_from_the_named_time_are_lifted(dated_living):
    # Strong beliefs (five proofs each) from April and June: they fill Mira's six places.
    for n in range(MAX_BELIEFS_PER_SUBJECT + 1):
        Observation.objects.create(
            game_save=dated_living,
            statement=f"Mira holds belief {n}.",
            subject="Mira",
            sources=[{"fact_id": 1, "turn_id": t} for t in (1, 2, 3, 10, 11)],
        )
    may = Observation.objects.create(
        game_save=dated_living,
        statement="Mira hid the key.",
        subject="Mira",
        sources=[{"fact_id": 3, "turn_id": 5}, {"fact_id": 4, "turn_id": 7}, {"fact_id": 5, "turn_id": 11}],
    )
    spread = Observation.objects.create(
        game_save=dated_living,
        statement="Mira fears the sea.",
        subject="Mira",
        sources=[{"fact_id": 6, "turn_id": t} for t in (1, 5, 9, 12)],
    )
    beliefs = [
        i
        for i in build_memory_context(
            game_save=dated_living, query_text="What did Mira do in May 2023?", focus_terms=["Mira"]
        ).items
        if i.layer == "belief"
    ]
    ids = [i.ref["observation_id"] for i in beliefs]
    assert ids[0] == may.pk and spread.pk not in ids  # one of four sources in May: not memory from May
    assert beliefs[0].why["named_time"] == (
        "lifted by the named time May 2023 (1 May 2023 – 31 May 2023): 2 of its 3 source turns lie inside it"
    )
    assert len(ids) == MAX_BELIEFS_PER_SUBJECT + 1  # the six strongest stay, after it
    plain = [
        i.ref["observation_id"]
        for i in build_memory_context(
            game_save=dated_living, query_text="What did Mira do?", focus_terms=["Mira"]
        ).items
        if i.layer == "belief"
    ]
    assert may.pk not in plain and plain == ids[1:]


def test_facts_print_their_story_time_once_per_date(dated_living):
    context = build_memory_context(
        game_save=dated_living, query_text="What did Mira do in May 2023?", focus_terms=["Mira"], token_budget=4000
    )
    lines = context.text.split("### Facts\n", 1)[1].split("\n\n", 1)[0].splitlines()
    headings = [line for line in lines if line.startswith("[")]
    assert headings == [
        f"[{date_of(t)}]" for t in sorted({f.ref["turn_id"] for f in facts_of(context)})
    ]  # story order, once each
    may_10 = lines.index(f"[{date_of(5)}]")
    assert lines[may_10 + 1 : may_10 + 4] == [
        "- (turn 5) Mira does thing 5.0.",
        "- (turn 5) Mira does thing 5.1.",
        "- (turn 5) Mira does thing 5.2.",
    ]
    fact = facts_of(context)[0]
    assert fact.text == "(turn 8) Mira does thing 8.2." and fact.why["story_time"] == date_of(8)
    assert fact.reason.startswith(f"fact naming Mira (focus term “Mira”), from turn 8 ({date_of(8)})")
    # The headings are counted in what the context spends, once per layer and date.
    assert context.used_tokens == sum(i.tokens for i in context.included) + sum(
        {(i.layer, i.why["group"]): i.why["group_tokens"] for i in context.included if i.why.get("group")}.values()
    )


def test_a_story_time_heading_is_paid_in_each_layer_that_prints_it():
    from studio.memory.recall.context import ContextItem

    def item(layer):
        return ContextItem(layer=layer, text="x", tokens=10, reason="", why={"group": "8 May", "group_tokens": 4})

    items = [item("narrative"), item("fact")]
    assemble(items, token_budget=27, shares={})
    assert [i.included for i in items] == [True, False] and items[1].cut.startswith(
        "over budget: needs 14 tokens, 13 left"
    )


def test_facts_in_turns(dated_living):
    Fact.objects.create(game_save=dated_living, turn_id=6, statement="Kaël pays.", entities=["Kaël"])
    found = get_facts_in_turns(dated_living.save_id, {5, 6, 11}, entity="mira")
    assert [(f.turn_id, f.statement) for f in found] == [
        (t, f"Mira does thing {t}.{n}.") for t in (11, 6, 5) for n in (2, 1, 0)
    ]
    assert [f.turn_id for f in get_facts_in_turns(dated_living.save_id, range(5, 9), max_turn_id=6, limit=4)] == [
        6,
        6,
        6,
        6,
    ]
    assert get_facts_in_turns(dated_living.save_id, [], entity="mira") == []
    assert get_facts_in_turns(dated_living.save_id, {6}, entity=" ") == []
    assert asdict(get_facts_in_turns(dated_living.save_id, {6}, entity="kaël")[0])["statement"] == "Kaël pays."
