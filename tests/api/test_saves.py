"""Universes and saves through the API: listing, reading, access across universes."""

from __future__ import annotations

import pytest

from studio.world.models import Save

from tests.support.api_errors import error_code

pytestmark = pytest.mark.django_db


def test_universes_lists_only_those_the_user_belongs_to(
    make_api, playtester, outsider, staff_user, universe, other_universe_save
):
    assert [u["slug"] for u in make_api(playtester).get("/api/v1/universes").json()["items"]] == ["test-world"]
    assert make_api(outsider).get("/api/v1/universes").json()["items"] == []
    staff_slugs = {u["slug"] for u in make_api(staff_user).get("/api/v1/universes").json()["items"]}
    assert staff_slugs == {"test-world", "elsewhere"}


def test_saves_lists_only_visible_saves_with_pagination(api, game_save, other_universe_save, universe):
    for i in range(3):
        Save.objects.create(universe=universe, name=f"Extra {i}", save_id=f"extra{i}")
    first = api.get("/api/v1/saves", {"limit": 2}).json()
    assert len(first["items"]) == 2 and first["next_offset"] == 2
    second = api.get("/api/v1/saves", {"limit": 2, "offset": 2}).json()
    assert len(second["items"]) == 2 and second["next_offset"] is None
    ids = {s["save_id"] for s in first["items"] + second["items"]}
    assert ids == {"testsave01", "extra0", "extra1", "extra2"}
    assert api.get("/api/v1/saves", {"universe": "elsewhere"}).json()["items"] == []


def test_save_detail(api, game_save):
    body = api.get(f"/api/v1/saves/{game_save.save_id}").json()
    assert body["save_id"] == "testsave01"
    assert body["universe"] == "test-world"
    assert body["current_turn"] == 3
    assert body["forked_from"] is None


@pytest.mark.parametrize(
    "path",
    [
        "",
        "/turns",
        "/facts",
        "/beliefs",
        "/mental-models",
        "/rewind-preview?turn_id=0",
        "/jobs",
        "/jobs/1",
    ],
)
def test_a_save_of_another_universe_is_404_for_every_read(api, other_universe_save, path):
    response = api.get(f"/api/v1/saves/{other_universe_save.save_id}{path}")
    assert response.status_code == 404
    assert error_code(response) == "not_found"


@pytest.mark.parametrize("path, body", [("/rewind", {"turn_id": 0}), ("/fork", {}), ("/jobs/1/retry", {})])
def test_a_save_of_another_universe_is_404_for_every_write(api, other_universe_save, path, body):
    response = api.post(f"/api/v1/saves/{other_universe_save.save_id}{path}", body)
    assert response.status_code == 404
    assert Save.objects.count() == 1


def test_an_outsider_sees_no_save(make_api, outsider, game_save):
    assert make_api(outsider).get(f"/api/v1/saves/{game_save.save_id}").status_code == 404


def test_turns_are_listed_oldest_first_with_state_on_request(api, states):
    body = api.get(f"/api/v1/saves/{states.save_id}/turns", {"include_state": "true"}).json()
    assert [t["turn_id"] for t in body["items"]] == [1, 2, 3]
    assert body["items"][0]["narrative"] == "Turn 1 text."
    assert body["items"][1]["state"] == {"hp": 8}
    after = api.get(f"/api/v1/saves/{states.save_id}/turns", {"after_turn": 2}).json()
    assert [t["turn_id"] for t in after["items"]] == [3]
    assert "state" not in after["items"][0]
