"""Missions page: the universe mission, and per-character missions as a table and as text."""

from __future__ import annotations

import json

import pytest

from studio.memory.missions import get_belief_missions, get_universe_mission

pytestmark = pytest.mark.django_db


def m_url(universe, suffix=""):
    return f"/universes/{universe.slug}/missions/{suffix}"


def test_page_and_fragment_offer_lore_characters(author_client, htmx, universe):
    page = author_client.get(m_url(universe)).content.decode()
    assert "<html" in page and '<option value="Kaël">' in page and "Remember debts." in page
    fragment = author_client.get(m_url(universe), **htmx).content.decode()
    assert fragment.strip().startswith('<div id="missions-panel">')


def test_universe_mission_htmx_and_no_js(author_client, htmx, universe):
    response = author_client.post(m_url(universe, "universe/"), {"mission": "Remember every slight."}, **htmx)
    assert "Saved the universe mission" in response.content.decode()
    assert get_universe_mission(universe) == "Remember every slight."
    response = author_client.post(m_url(universe, "universe/"), {"mission": ""})
    assert response.status_code == 302 and get_universe_mission(universe) == ""


def test_table_save_updates_the_text_view(author_client, htmx, universe):
    response = author_client.post(
        m_url(universe, "table/"),
        {
            "name": ["Kaël", "Mira the Trader", ""],
            "mission": ["Remembers debts: every one.", "Remembers prices.", ""],
        },
        **htmx,
    )
    html = response.content.decode()
    assert "Saved 2 character missions" in html
    assert "Kaël: Remembers debts: every one.\nMira the Trader: Remembers prices." in html
    assert get_belief_missions(universe) == {
        "Kaël": "Remembers debts: every one.",
        "Mira the Trader": "Remembers prices.",
    }


def test_text_save_updates_the_table_view(author_client, htmx, universe):
    response = author_client.post(
        m_url(universe, "text/"),
        {
            "text": "Kaël: Remembers debts.\nno colon here\nMira: Remembers: prices.\n",
        },
        **htmx,
    )
    html = response.content.decode()
    assert 'value="Mira"' in html and ">Remembers: prices.</textarea>" in html
    assert "Ignored lines" in html and "no colon here" in html
    assert get_belief_missions(universe) == {"Kaël": "Remembers debts.", "Mira": "Remembers: prices."}


def test_text_without_js_redirects(author_client, universe):
    response = author_client.post(m_url(universe, "text/"), {"text": "Kaël: Hoards grudges."})
    assert response.status_code == 302
    assert json.loads(universe.meta.get(key="belief_missions").value) == {"Kaël": "Hoards grudges."}


def test_table_errors_save_nothing_and_keep_input(author_client, htmx, universe):
    author_client.post(m_url(universe, "text/"), {"text": "Kaël: Old."})
    response = author_client.post(
        m_url(universe, "table/"),
        {
            "name": ["Kaël", "Kaël", "", "Bad:Name"],
            "mission": ["a", "b", "orphan mission", "c"],
        },
        **htmx,
    )
    html = response.content.decode()
    assert "Nothing was saved" in html and "appears twice" in html and "has no character name" in html
    assert ">orphan mission</textarea>" in html
    assert get_belief_missions(universe) == {"Kaël": "Old."}
    response = author_client.post(m_url(universe, "table/"), {"name": ["Bad:Name"], "mission": ["c"]})
    assert response.status_code == 400 and "may not contain a colon" in response.content.decode()


def test_clearing_a_name_removes_the_row(author_client, universe):
    author_client.post(m_url(universe, "text/"), {"text": "Kaël: Old.\nMira: Prices."})
    author_client.post(m_url(universe, "table/"), {"name": ["", "Mira"], "mission": ["", "Prices."]})
    assert get_belief_missions(universe) == {"Mira": "Prices."}


def test_playtester_cannot_change_missions(client, playtester, universe):
    client.force_login(playtester)
    for suffix, data in [
        ("universe/", {"mission": "x"}),
        ("table/", {"name": ["a"], "mission": ["b"]}),
        ("text/", {"text": "a: b"}),
    ]:
        assert client.post(m_url(universe, suffix), data).status_code == 403
    assert get_universe_mission(universe) == "Remember debts."


def test_an_invalid_universe_mission_writes_nothing(author_client, htmx, universe):
    author_client.post(m_url(universe, "universe/"), {"mission": "Remember every slight."}, **htmx)
    response = author_client.post(m_url(universe, "universe/"), {"mission": "Remember\x00 nothing."})
    html = response.content.decode()
    assert response.status_code == 400 and "Nothing was saved" in html and "Null characters are not allowed" in html
    assert "Saved the universe mission" not in html
    response = author_client.post(m_url(universe, "universe/"), {"mission": "\x00"}, **htmx)
    assert "Null characters are not allowed" in response.content.decode()
    assert get_universe_mission(universe) == "Remember every slight."
