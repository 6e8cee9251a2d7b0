"""Missions are checked once, by the service (`missions_set` → `missions_validate`); the page shows its errors."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from studio.memory.missions import get_belief_missions, get_universe_mission
from studio.universes import services

pytestmark = pytest.mark.django_db

TOO_LONG = "x" * (services.MAX_MISSION_CHARS + 1)
BAD_ROWS = [("Kaël", "a"), ("Kaël", "b"), ("", "orphan mission"), ("Bad:Name", "c"), ("Mira", TOO_LONG), ("", "")]


def messages_of(error: ValidationError) -> list[str]:
    return sorted(error.messages)


def test_the_service_reports_every_problem_of_table_rows_at_once(universe):
    with pytest.raises(ValidationError) as refused:
        services.missions_set(universe=universe, missions=BAD_ROWS)
    assert messages_of(refused.value) == sorted(
        [
            "“Kaël” appears twice.",
            "A mission has no character name: “orphan mission”.",
            "“Bad:Name”: a name may not contain a colon or a line break.",
            f"“Mira”: the mission is longer than {services.MAX_MISSION_CHARS} characters.",
        ]
    )
    assert get_belief_missions(universe) == {}


def test_the_page_shows_the_services_errors_all_at_once(author_client, htmx, universe):
    names, missions = zip(*BAD_ROWS)
    response = author_client.post(
        f"/universes/{universe.slug}/missions/table/", {"name": list(names), "mission": list(missions)}, **htmx
    )
    html = response.content.decode()
    with pytest.raises(ValidationError) as refused:
        services.missions_validate(BAD_ROWS)
    for message in refused.value.messages:
        assert message in html, message
    assert "Nothing was saved" in html and get_belief_missions(universe) == {}


def test_table_rows_and_the_meta_json_give_the_same_missions(universe):
    rows = [(" Kaël ", "Remembers   debts."), ("", ""), ("Mira", "Prices.")]
    assert services.missions_set(universe=universe, missions=rows) == {"Kaël": "Remembers debts.", "Mira": "Prices."}
    assert services.missions_validate(dict(rows[0:1] + rows[2:])) == get_belief_missions(universe)


def test_an_overlong_universe_mission_is_refused_by_the_service_on_the_page(author_client, universe):
    response = author_client.post(f"/universes/{universe.slug}/missions/universe/", {"mission": TOO_LONG})
    assert response.status_code == 400
    message = f"belief_mission is one mission of at most {services.MAX_MISSION_CHARS} characters."
    assert message in response.content.decode()
    assert get_universe_mission(universe) == "Remember debts."


def test_the_text_block_reports_what_the_engines_reading_ignores(universe):
    missions, ignored = services.missions_from_text("Kaël: Debts.\nno colon\nMira:\n : orphan\n\nVoss: a: b")
    assert missions == {"Kaël": "Debts.", "Voss": "a: b"}
    assert ignored == ["no colon", "Mira:", ": orphan"]
