"""Real-browser test of "Record for lore replay": a POST button (htmx, CSRF) on the Context
viewer and the search playground; assembling or searching (GETs) records nothing."""

from __future__ import annotations

import pytest

from studio.memory.models import RecordedQuery

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def searchable(game_save, vector_memory):
    vector_memory.embed_chunks(
        game_save.save_id,
        [
            {"turn_id": 1, "text": "Kaël docks at Port Vey with contraband."},
            {"turn_id": 2, "text": "Mira lends Kaël ten silver crowns."},
        ],
    )
    return game_save


def test_context_and_search_record_only_from_their_button(logged_in_page, playtester, searchable):
    page = logged_in_page(playtester)
    page.goto(f"/memory/{searchable.save_id}/context/")
    page.fill("#id_q", "Mira and the silver crowns")
    page.fill("#id_budget", "300")
    page.click("#context-form button[type=submit]")
    page.wait_for_selector("#budget-line")
    assert "of 300 tokens used" in page.locator("#budget-line").inner_text()
    assert not RecordedQuery.objects.exists()  # assembling is a GET: nothing written
    page.click("#context-record button[type=submit]")
    page.wait_for_selector("#recorded-note")
    assert "of 300 tokens used" in page.locator("#budget-line").inner_text()  # the same parameters
    rows = list(RecordedQuery.objects.filter(game_save=searchable))
    assert len(rows) == 2 and {r.query_text for r in rows} == {"Mira and the silver crowns"}

    page.goto(f"/memory/{searchable.save_id}/search/")
    page.fill("#id_q", "silver crowns")
    page.click("#playground-form button[type=submit]")
    page.wait_for_selector("tr.result")
    assert RecordedQuery.objects.count() == 2
    page.click("#playground-record button[type=submit]")
    page.wait_for_selector("#result-summary:has-text('recorded for replay')")
    assert RecordedQuery.objects.filter(params__source="playground").count() == 1
