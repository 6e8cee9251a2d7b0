"""Search playground (results with explain records and stage timings) and "why not"."""
from __future__ import annotations

import pytest
from django.urls import reverse

from studio.memory.models import RecordedQuery

pytestmark = pytest.mark.django_db


@pytest.fixture
def chunks(vector_memory, game_save):  # noqa: F811
    ids = vector_memory.embed_chunks(
        game_save.save_id,
        [
            {"turn_id": 1, "text": "Kaël docks at Port Vey with a hold of contraband."},
            {"turn_id": 2, "text": "Mira lends Kaël ten silver crowns."},
            {"turn_id": 3, "text": "A storm drowns the harbour lights."},
            {"turn_id": 4, "text": "Kaël repays the silver crowns."},  # after the save's turn 3
            {"turn_id": 0, "text": "Port Vey is a harbour town.", "chunk_type": "lore", "metadata_extra": {"entry_id": "port-vey"}},
        ],
    )
    return dict(zip(["docks", "loan", "storm", "future", "lore"], ids))


def url(game_save, name="memory:playground"):
    return reverse(name, args=[game_save.save_id])


def test_playground_full_page_shows_results_with_explain_and_timings(client, playtester, game_save, chunks):
    client.force_login(playtester)
    html = client.get(url(game_save), {"q": "silver crowns", "k": 3}).content.decode()
    assert "<html" in html and 'id="playground-form"' in html
    assert "Mira lends Kaël ten silver crowns." in html
    assert "Kaël repays" not in html  # turn 4 lies after the save's current turn
    first = html[html.index(f'data-chunk="{chunks["loan"]}"'):]
    assert 'data-final-rank="1"' in first[:200]
    assert 'data-explain="semantic">#1' in first and 'data-explain="lexical">#1' in first
    assert 'data-stage="total"' in html and 'data-stage="semantic"' in html


def test_playground_fragment(client, playtester, game_save, chunks):
    client.force_login(playtester)
    html = client.get(url(game_save), {"q": "harbour", "chunk": "lore"}, HTTP_HX_REQUEST="true").content.decode()
    assert html.lstrip().startswith('<div id="results">') and "<html" not in html
    assert "Port Vey is a harbour town." in html and "storm" not in html  # lore only


def test_playground_horizon_focus_and_exclude_lore(client, playtester, game_save, chunks):
    client.force_login(playtester)
    html = client.get(url(game_save), {"q": "harbour Port Vey", "chunk": "narrative_only", "horizon": 1, "k": 5}).content.decode()
    assert "Kaël docks at Port Vey" in html and "harbour town" not in html and "storm" not in html
    boosted = client.get(url(game_save), {"q": "harbour", "focus": "Mira", "k": 5}).content.decode()
    row = boosted[boosted.index(f'data-chunk="{chunks["loan"]}"'):]
    assert 'data-explain="focus">+' in row[: row.index("</tr>")]


def test_playground_records_for_replay_only_when_asked(client, playtester, game_save, chunks):
    client.force_login(playtester)
    client.get(url(game_save), {"q": "silver crowns"})
    assert not RecordedQuery.objects.exists()
    client.get(url(game_save), {"q": "silver crowns", "record": "on", "k": 2})
    recorded = RecordedQuery.objects.get()
    assert recorded.turn_id == 3 and recorded.params["k"] == 2 and recorded.params["source"] == "playground"
    assert recorded.result_ids[0] == f"chunk:{chunks['loan']}"


def test_why_not_reports_each_arm(client, playtester, game_save, chunks):
    client.force_login(playtester)
    params = {"q": "silver crowns", "k": 1, "chunk_id": chunks["docks"]}
    html = client.get(url(game_save, "memory:why_not"), params, HTTP_HX_REQUEST="true").content.decode()
    assert html.lstrip().startswith('<div id="why-not">') and "<html" not in html
    assert "Not in the top 1" in html
    assert 'data-arm="semantic"' in html and 'data-arm="lexical"' in html
    page = client.get(url(game_save, "memory:why_not"), params).content.decode()
    assert "<html" in page and "Not in the top 1" in page
    top = client.get(url(game_save, "memory:why_not"), {**params, "chunk_id": chunks["loan"]}).content.decode()
    assert "In the results at rank 1 of 1." in top


def test_why_not_explains_a_filtered_chunk(client, playtester, game_save, chunks):
    client.force_login(playtester)
    html = client.get(url(game_save, "memory:why_not"), {"q": "crowns", "chunk_id": chunks["future"]}).content.decode()
    assert "after the horizon (turn 3)" in html
    html = client.get(url(game_save, "memory:why_not"), {"q": "crowns", "chunk_id": "nope"}).content.decode()
    assert "no such chunk" in html


def test_playground_horizon_beyond_the_current_turn_is_clamped(client, playtester, game_save, chunks):
    client.force_login(playtester)
    html = client.get(url(game_save), {"q": "silver crowns", "horizon": 99, "k": 10}).content.decode()
    assert "Mira lends Kaël ten silver crowns." in html and "Kaël repays" not in html
    why = client.get(url(game_save, "memory:why_not"), {"q": "crowns", "horizon": 99, "chunk_id": chunks["future"]}).content.decode()
    assert "after the horizon (turn 3)" in why


def test_playground_says_which_arms_ran_and_why_the_turn_arm_was_skipped(client, playtester, game_save, chunks):
    client.force_login(playtester)
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        html = client.get(url(game_save), {"q": "silver crowns", "k": 3}, **headers).content.decode()
        notes = html[html.index('id="arm-notes"'):]
        notes = notes[: notes.index("</p>")]
        assert "Arms that ran: semantic, lexical, context" in notes
        # One narrative chunk per turn: the turn arm would repeat the lexical arm.
        assert 'data-skipped-arm="turn"' in notes and "one chunk per turn" in notes
