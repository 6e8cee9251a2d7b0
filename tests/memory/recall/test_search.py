"""The search service: one clamp of the turn horizon, honoured by the API, the playground and the context.

The save is at turn 3; a chunk of turn 4 is what a failed rewind leaves behind, so no
search may return it whatever horizon is asked for, while an earlier horizon is kept.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from studio.memory.recall.context import build_memory_context
from studio.memory.models import RecordedQuery
from studio.memory.recall.search import memory_explain_chunk, memory_horizon, memory_search

pytestmark = pytest.mark.django_db

TEXTS = {
    1: "Kaël docks at Port Vey with silver crowns.",
    2: "Mira lends Kaël ten silver crowns.",
    3: "Kaël counts the silver crowns in the storm.",
    4: "Kaël repays the silver crowns to Mira.",  # beyond the save's current turn (3)
}


@pytest.fixture
def chunks(vector_memory, game_save):
    ids = vector_memory.embed_chunks(game_save.save_id, [{"turn_id": t, "text": text} for t, text in TEXTS.items()])
    return dict(zip(TEXTS, ids))


def turns_of(results) -> set[int]:
    return {int(r["turn_id"]) for r in results}


@pytest.mark.parametrize("asked, expected", [(None, 3), (99, 3), (4, 3), (3, 3), (1, 1), (0, 0)])
def test_memory_horizon_never_passes_the_current_turn(game_save, asked, expected):
    assert memory_horizon(game_save=game_save, turn_id=asked) == expected


def test_a_horizon_beyond_the_current_turn_is_clamped(game_save, chunks):
    outcome = memory_search(game_save=game_save, query_text="Kaël repays silver crowns", k=10, current_turn_id=99)
    assert outcome.current_turn_id == 3
    assert turns_of(outcome.results) == {1, 2, 3}


def test_a_lower_horizon_is_kept(game_save, chunks):
    outcome = memory_search(game_save=game_save, query_text="silver crowns", k=10, current_turn_id=1)
    assert outcome.current_turn_id == 1
    assert turns_of(outcome.results) == {1}


def test_max_turn_id_narrows_the_clamped_horizon_but_cannot_widen_it(game_save, chunks):
    narrow = memory_search(game_save=game_save, query_text="silver crowns", k=10, max_turn_id=2)
    assert narrow.current_turn_id == 3 and turns_of(narrow.results) == {1, 2}
    wide = memory_search(game_save=game_save, query_text="silver crowns", k=10, max_turn_id=99)
    assert turns_of(wide.results) == {1, 2, 3}


def test_explain_chunk_uses_the_same_clamp(game_save, chunks):
    beyond = memory_explain_chunk(game_save=game_save, query_text="crowns", chunk_id=chunks[4], current_turn_id=99)
    assert beyond["filtered_out"] == "turn 4 is after the horizon (turn 3)"
    earlier = memory_explain_chunk(game_save=game_save, query_text="crowns", chunk_id=chunks[2], current_turn_id=1)
    assert earlier["filtered_out"] == "turn 2 is after the horizon (turn 1)"
    kept = memory_explain_chunk(game_save=game_save, query_text="crowns", chunk_id=chunks[3], current_turn_id=99)
    assert kept["filtered_out"] is None and kept["ranks"]


def test_recording_stores_what_the_search_ran_with(game_save, chunks):
    memory_search(game_save=game_save, query_text="silver crowns", k=2)
    assert not RecordedQuery.objects.exists()
    outcome = memory_search(
        game_save=game_save, query_text="silver crowns", k=2, exclude_chunk_type="lore", record_source="api"
    )
    recorded = RecordedQuery.objects.get()
    assert outcome.recorded == recorded
    assert recorded.turn_id == 3 and recorded.query_text == "silver crowns"
    assert {k: v for k, v in recorded.params.items() if k != "labels"} == {
        "k": 2,
        "exclude_chunk_type": "lore",
        "source": "api",
    }
    assert recorded.result_ids == [f"chunk:{r['id']}" for r in outcome.results]


# -- every caller goes through the one clamp (the API's: tests/api/test_query.py) ----------


def test_the_playground_goes_through_the_clamp(client, playtester, game_save, chunks, stricter_clamp):
    client.force_login(playtester)
    html = client.get(
        reverse("memory:playground", args=[game_save.save_id]), {"q": "silver crowns", "k": 10, "horizon": 99}
    ).content.decode()
    assert TEXTS[2] in html and TEXTS[3] not in html and TEXTS[4] not in html
    why_not = client.get(
        reverse("memory:why_not", args=[game_save.save_id]), {"q": "crowns", "chunk_id": chunks[3]}
    ).content.decode()
    assert "after the horizon (turn 2)" in why_not


def test_the_context_goes_through_the_clamp(game_save, chunks, stricter_clamp):
    context = build_memory_context(game_save=game_save, query_text="silver crowns", k_narrative=10)
    narrative = [i for i in context.items if i.layer == "narrative"]
    assert {i.ref["turn_id"] for i in narrative} == {1, 2}
