"""Facts, beliefs (with trends) and mental models through the API: filters and pagination."""
from __future__ import annotations

import pytest

from studio.memory import facts as F
from studio.memory import mental_models as MM
from studio.memory import observations as O
from studio.saves.models import Event

from .conftest import error_code

pytestmark = pytest.mark.django_db


@pytest.fixture
def living(game_save):
    """A save at turn 40 with facts on several turns, beliefs of known trends, two models."""
    for turn in range(4, 41):
        Event.objects.create(game_save=game_save, turn_id=turn, narrative=f"Turn {turn}.")
    game_save.current_turn = 40
    game_save.memory_mode = "living"
    game_save.save()
    ids = {}
    for turn in (1, 2, 3, 30, 38):
        ids[turn] = F.insert_facts(
            game_save.save_id, turn, [F.Fact(statement=f"Kael did thing {turn}.", entities=["Kael"]),
                                      F.Fact(statement=f"Mira saw turn {turn}.", entities=["Mira"])]
        )
    # new: every source recent; stale: no source in the last 15 turns.
    O.insert_observation(game_save.save_id, O.Observation(
        statement="Kael is busy lately.", subject="Kael", sources=[{"fact_id": ids[38][0], "turn_id": 38}],
        created_turn_id=38, updated_turn_id=38))
    O.insert_observation(game_save.save_id, O.Observation(
        statement="Mira watched the early days.", subject="Mira",
        sources=[{"fact_id": ids[1][1], "turn_id": 1}, {"fact_id": ids[2][1], "turn_id": 2}],
        created_turn_id=2, updated_turn_id=2))
    MM.upsert_mental_model(game_save.save_id, "Kael", "Kael, a busy smuggler.", 38, [])
    MM.upsert_mental_model(game_save.save_id, "", "A harbour world.", 3, [])
    return game_save


def test_facts_most_recent_first_with_entity_and_horizon(api, living):
    url = f"/api/v1/saves/{living.save_id}/facts"
    body = api.get(url).json()
    assert len(body["items"]) == 10
    assert body["items"][0]["turn_id"] == 38
    assert {"fact_id", "statement", "entities", "who", "turn_id"} <= set(body["items"][0])
    kael = api.get(url, {"entity": "kael"}).json()["items"]
    assert len(kael) == 5 and all("Kael" in f["entities"] for f in kael)
    early = api.get(url, {"max_turn_id": 3}).json()["items"]
    assert {f["turn_id"] for f in early} == {1, 2, 3}


def test_facts_pages_do_not_overlap(api, living):
    url = f"/api/v1/saves/{living.save_id}/facts"
    seen = []
    offset = 0
    while offset is not None:
        body = api.get(url, {"limit": 3, "offset": offset}).json()
        assert len(body["items"]) <= 3
        seen += [f["fact_id"] for f in body["items"]]
        offset = body["next_offset"]
    assert len(seen) == 10 and len(set(seen)) == 10


def test_beliefs_carry_their_trend_and_filter_by_it(api, living):
    url = f"/api/v1/saves/{living.save_id}/beliefs"
    body = api.get(url).json()
    assert body["now_turn"] == 40
    trends = {b["subject"]: b["trend"] for b in body["items"]}
    assert trends == {"Kael": "new", "Mira": "stale"}
    only_stale = api.get(url, {"trend": "stale"}).json()["items"]
    assert [b["subject"] for b in only_stale] == ["Mira"]
    assert [b["statement"] for b in api.get(url, {"subject": "KAEL"}).json()["items"]] == ["Kael is busy lately."]
    # Read at an earlier horizon the early belief is new, and the later one does not exist yet.
    then = api.get(url, {"max_turn_id": 5}).json()
    assert then["now_turn"] == 5
    assert [(b["subject"], b["trend"]) for b in then["items"]] == [("Mira", "new")]


def test_beliefs_reject_an_unknown_trend(api, living):
    response = api.get(f"/api/v1/saves/{living.save_id}/beliefs", {"trend": "rising"})
    assert response.status_code == 400
    assert "trend" in response.json()["error"]["details"]


def test_mental_models_with_subject_filter(api, living):
    url = f"/api/v1/saves/{living.save_id}/mental-models"
    body = api.get(url).json()
    assert [m["subject"] for m in body["items"]] == ["Kael", ""]
    assert api.get(url, {"subject": "kael"}).json()["items"][0]["summary"] == "Kael, a busy smuggler."
    world = api.get(url, {"subject": ""}).json()["items"]
    assert [m["summary"] for m in world] == ["A harbour world."]
    paged = api.get(url, {"limit": 1, "offset": 1}).json()
    assert [m["subject"] for m in paged["items"]] == [""] and paged["next_offset"] is None


def test_reads_are_allowed_to_members_without_a_role(make_api, member_without_role, living):
    response = make_api(member_without_role).get(f"/api/v1/saves/{living.save_id}/beliefs")
    assert response.status_code == 200


def test_reads_of_unknown_save_are_404(api, db):
    response = api.get("/api/v1/saves/nope/facts")
    assert response.status_code == 404
    assert error_code(response) == "not_found"
