"""The temporal arm through `memory_search`: a query naming a time prefers the turns of that story time.

A save of twelve turns, four in each of April, May and June 2023 (the turn state's `date`,
LoCoMo's format). The April turns say "lantern" most, so without the arm they win; asked
"in May 2023", the May turns come first, and the explain record says why. A query that
names no time runs exactly as a search without the arm.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from studio.memory.recall.search import memory_explain_chunk, memory_search
from studio.memory.recall.temporal import time_preference, turn_runs
from studio.world.models import Event, Save, StateCache

pytestmark = pytest.mark.django_db

MONTHS = {1: "April", 2: "May", 3: "June"}


def text_of(turn: int) -> str:
    if turn <= 4:
        return f"The lantern, the lantern, the brass lantern glows over the harbour (night {turn})."
    return f"Mira lights a lantern by the well and waits (evening {turn})."


@pytest.fixture
def dated_save(universe, vector_memory):
    game_save = Save.objects.create(universe=universe, name="Dated", save_id="dated01")
    for turn in range(1, 13):
        Event.objects.create(game_save=game_save, turn_id=turn, player_input="", narrative=text_of(turn))
        month = MONTHS[(turn - 1) // 4 + 1]
        StateCache.objects.create(
            game_save=game_save,
            turn_id=turn,
            state={"date": f"7:00 pm on {(turn - 1) % 4 + 10} {month}, 2023", "location": "harbour"},
        )
    game_save.current_turn = 12
    game_save.save()
    vector_memory.embed_chunks(game_save.save_id, [{"turn_id": t, "text": text_of(t)} for t in range(1, 13)])
    return game_save


def turns(outcome) -> list[int]:
    return [row["turn_id"] for row in outcome.results]


def without_temporal_arm(vector_memory):
    config = vector_memory.config
    vector_memory.set_config(replace(config, arms=tuple(a for a in config.arms if a != "temporal")))
    return config


def test_a_named_month_prefers_its_turns(dated_save, vector_memory):
    with_arm = memory_search(game_save=dated_save, query_text="the lantern in May 2023", k=4)
    assert set(turns(with_arm)[:4]) >= {5, 6, 7} and {5, 6, 7, 8} & set(turns(with_arm)[:2])
    assert with_arm.stats.named_time == "named time: May 2023 (1 May 2023 – 31 May 2023) → turns 5-8 preferred"
    ranked = [row for row in with_arm.results if row["explain"]["temporal_rank"] is not None]
    assert {row["turn_id"] for row in ranked} <= {5, 6, 7, 8} and ranked
    assert "temporal" in with_arm.stats.arm_sizes

    default = without_temporal_arm(vector_memory)
    try:
        plain = memory_search(game_save=dated_save, query_text="the lantern in May 2023", k=4)
    finally:
        vector_memory.set_config(default)
    assert set(turns(plain)) == {1, 2, 3, 4}  # "lantern" three times a turn wins without the arm
    assert plain.stats.skipped_arms["temporal"] == "not in RetrievalConfig.arms"


def test_a_query_naming_no_time_is_the_search_without_the_arm(dated_save, vector_memory):
    asked = memory_search(game_save=dated_save, query_text="Mira lights a lantern", k=6)
    default = without_temporal_arm(vector_memory)
    try:
        plain = memory_search(game_save=dated_save, query_text="Mira lights a lantern", k=6)
    finally:
        vector_memory.set_config(default)
    assert [(r["id"], r["score"], r["explain"]) for r in asked.results] == [
        (r["id"], r["score"], r["explain"]) for r in plain.results
    ]
    assert asked.stats.named_time == "" and "temporal" not in asked.stats.skipped_arms
    assert all(row["explain"]["temporal_rank"] is None for row in asked.results)


def test_relative_time_counts_from_the_latest_turn(dated_save):
    # Turn 12 is 13 June 2023: yesterday is 12 June, turn 11.
    prefer = time_preference(game_save=dated_save, query_text="what burned yesterday?", horizon=12)
    assert prefer.turns == {11}
    assert prefer.note == "named time: yesterday (12 June 2023) → turn 11 preferred"
    # At an earlier horizon the story time is that turn's: "yesterday" of turn 6 (11 May) is turn 5.
    assert time_preference(game_save=dated_save, query_text="yesterday", horizon=6).turns == {5}


def test_a_named_time_with_no_turn_inside_is_explained(dated_save):
    outcome = memory_search(game_save=dated_save, query_text="the lantern in 2019", k=3)
    assert outcome.stats.named_time == "named time: 2019 (1 January 2019 – 31 December 2019) → no turn inside it"
    assert outcome.stats.skipped_arms["temporal"] == "no chunk searched lies inside the named time"


def test_a_time_covering_most_turns_adds_no_arm(dated_save):
    outcome = memory_search(game_save=dated_save, query_text="the lantern in 2023", k=3)
    assert outcome.stats.skipped_arms["temporal"].startswith("the named time holds 12 of the 12 chunks searched")
    # "since May 2023": 8 of 12 turns, more than half.
    outcome = memory_search(game_save=dated_save, query_text="the lantern since May 2023", k=3)
    assert outcome.stats.skipped_arms["temporal"].startswith("the named time holds 8 of the 12 chunks searched")
    # "since June 2023": 4 of 12, the arm runs.
    outcome = memory_search(game_save=dated_save, query_text="the lantern since June 2023", k=3)
    assert "temporal" in outcome.stats.arm_sizes


def test_no_story_time_no_arm(universe, vector_memory):
    game_save = Save.objects.create(universe=universe, name="Undated", save_id="undated01", current_turn=2)
    for turn in (1, 2):
        Event.objects.create(game_save=game_save, turn_id=turn, player_input="", narrative=text_of(turn))
        StateCache.objects.create(game_save=game_save, turn_id=turn, state={"date": "the 3rd of Frostmoot"})
    vector_memory.embed_chunks(game_save.save_id, [{"turn_id": t, "text": text_of(t)} for t in (1, 2)])
    outcome = memory_search(game_save=game_save, query_text="the lantern in May 2023", k=2)
    assert outcome.stats.named_time == "" and "temporal" not in outcome.stats.skipped_arms
    assert time_preference(game_save=game_save, query_text="three days ago", horizon=2) is None


def test_day_counters(universe):
    game_save = Save.objects.create(universe=universe, name="Days", save_id="days01", current_turn=6)
    for turn in range(1, 7):
        StateCache.objects.create(game_save=game_save, turn_id=turn, state={"day": f"Day {(turn + 1) // 2}"})
    # Turns 5-6 are day 3: yesterday is day 2, turns 3-4.
    assert time_preference(game_save=game_save, query_text="what happened yesterday", horizon=6).turns == {3, 4}
    assert time_preference(game_save=game_save, query_text="on day 1", horizon=6).turns == {1, 2}
    assert time_preference(game_save=game_save, query_text="in May 2023", horizon=6).turns == frozenset()


def test_lore_searches_have_no_named_time(dated_save):
    assert time_preference(game_save=dated_save, query_text="in May 2023", horizon=12, chunk_type="lore") is None


def test_why_not_ranks_the_chunk_in_the_temporal_arm(dated_save, vector_memory):
    chunk_id = next(c["id"] for c in vector_memory.get_chunks(dated_save.save_id) if c["turn_id"] == 6)
    report = memory_explain_chunk(game_save=dated_save, query_text="the lantern in May 2023", chunk_id=chunk_id, k=3)
    assert 1 <= report["ranks"]["temporal"] <= 4
    assert report["final_rank"] is not None


def test_turn_runs():
    assert turn_runs([1, 2, 3, 7, 9, 10]) == "1-3, 7, 9-10"
    assert turn_runs(list(range(1, 30, 2))) == "1, 3, 5, 7, 9, 11, … (15 turns)"


def test_the_search_page_says_which_turns_the_named_time_prefers(client, playtester, dated_save):
    from django.urls import reverse

    client.force_login(playtester)
    url = reverse("memory:playground", args=[dated_save.save_id])
    html = client.get(url, {"q": "the lantern in May 2023", "k": 4}).content.decode()
    assert 'id="named-time"' in html and "Named time: May 2023 (1 May 2023 – 31 May 2023) → turns 5-8 preferred" in html
    assert 'data-explain="temporal">#1<' in html
    plain = client.get(url, {"q": "the lantern", "k": 4}).content.decode()
    assert 'id="named-time"' not in plain and 'data-explain="temporal"' not in plain
    chunk_id = next(c["id"] for c in vector_memory_chunks(dated_save) if c["turn_id"] == 6)
    why = client.get(
        reverse("memory:why_not", args=[dated_save.save_id]),
        {"q": "the lantern in May 2023", "k": 4, "chunk_id": chunk_id},
    ).content.decode()
    assert '<tr data-arm="temporal">' in why
    why_plain = client.get(
        reverse("memory:why_not", args=[dated_save.save_id]), {"q": "the lantern", "k": 4, "chunk_id": chunk_id}
    ).content.decode()
    assert 'data-arm="temporal"' not in why_plain and '<tr data-arm="turn">' in why_plain


def vector_memory_chunks(game_save):
    from studio.memory.vector import get_vector_memory

    return get_vector_memory().get_chunks(game_save.save_id)


def test_the_api_query_says_which_turns_the_named_time_prefers(make_api, playtester, dated_save):
    api = make_api(playtester)
    url = f"/api/v1/saves/{dated_save.save_id}/query"
    body = api.post(url, {"query_text": "the lantern in May 2023", "k": 4}).json()
    assert body["stats"]["named_time"] == "named time: May 2023 (1 May 2023 – 31 May 2023) → turns 5-8 preferred"
    ranked = {row["turn_id"] for row in body["results"] if row["explain"]["temporal_rank"]}
    assert ranked and ranked <= {5, 6, 7, 8}
    plain = api.post(url, {"query_text": "the lantern", "k": 4}).json()
    assert plain["stats"]["named_time"] == "" and "temporal" not in plain["stats"]["skipped_arms"]


def test_the_narrators_context_says_which_time_it_prefers(dated_save, vector_memory):
    from studio.memory.recall.context import build_memory_context

    context = build_memory_context(
        game_save=dated_save, query_text="What happened in May 2023?", vector_memory=vector_memory
    )
    assert "Named time: May 2023 (1 May 2023 – 31 May 2023) → turns 5-8 preferred." in context.notes
    preferred = [i for i in context.items if i.layer == "narrative" and i.why.get("temporal_rank") is not None]
    assert preferred and all("named time #" in i.reason for i in preferred)
    plain = build_memory_context(
        game_save=dated_save, query_text="What happened at the market?", vector_memory=vector_memory
    )
    assert not any(n.startswith("Named time") for n in plain.notes)
