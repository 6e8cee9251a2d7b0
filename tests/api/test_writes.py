"""Creating saves, appending turns and editing a turn's narrative through the API."""

from __future__ import annotations

import pytest

from studio.memory.models import Job, JobKind
from studio.world.models import Event, Save, StateCache

from tests.support.api_errors import error_code

pytestmark = pytest.mark.django_db


def test_create_a_save(api, universe):
    response = api.post("/api/v1/saves", {"universe": "test-world", "name": "Engine run", "memory_mode": "living"})
    assert response.status_code == 201
    body = response.json()
    save = Save.objects.get(save_id=body["save_id"])
    assert save.name == "Engine run" and save.memory_mode == "living" and save.current_turn == 0
    assert save.meta == {"belief_mission": "Remember debts."}
    assert body["universe"] == "test-world"
    assert Job.objects.filter(game_save=save, kind=JobKind.SYNC_LORE).exists()


def test_create_a_save_validates_every_field(api, universe):
    response = api.post("/api/v1/saves", {"name": "", "memory_mode": "dreaming", "beliefs_enabled": "yes"})
    assert response.status_code == 400
    assert set(response.json()["error"]["details"]) == {"universe", "name", "memory_mode", "beliefs_enabled"}
    assert not Save.objects.exists()


def test_create_a_save_in_a_universe_one_does_not_belong_to_is_404(make_api, outsider, universe, other_universe_save):
    response = make_api(outsider).post("/api/v1/saves", {"universe": "test-world", "name": "x"})
    assert response.status_code == 404
    assert Save.objects.filter(universe=universe).count() == 0


def test_create_a_save_needs_the_playtester_role(make_api, member_without_role, universe):
    response = make_api(member_without_role).post("/api/v1/saves", {"universe": "test-world", "name": "x"})
    assert response.status_code == 403
    assert error_code(response) == "permission_denied"
    assert not Save.objects.exists()


def test_append_a_turn(api, game_save):
    url = f"/api/v1/saves/{game_save.save_id}/turns"
    response = api.post(
        url, {"player_input": "open the door", "narrative": "The door creaks.", "state": {"room": "hall"}}
    )
    assert response.status_code == 201
    body = response.json()
    assert body["turn"]["turn_id"] == 4 and body["turn"]["state"] == {"room": "hall"}
    assert body["save"]["current_turn"] == 4
    event = Event.objects.get(game_save=game_save, turn_id=4)
    assert (event.player_input, event.narrative) == ("open the door", "The door creaks.")
    assert StateCache.objects.get(game_save=game_save, turn_id=4).state == {"room": "hall"}
    assert Job.objects.filter(game_save=game_save, kind=JobKind.EMBED_TURN, turn_id=4).exists()


def test_append_with_the_expected_turn_id(api, game_save):
    url = f"/api/v1/saves/{game_save.save_id}/turns"
    assert api.post(url, {"narrative": "Four.", "turn_id": 4}).status_code == 201
    response = api.post(url, {"narrative": "Four again.", "turn_id": 4})
    assert response.status_code == 409
    assert error_code(response) == "conflict"
    assert response.json()["error"]["details"] == {"current_turn": 4}
    assert Event.objects.filter(game_save=game_save).count() == 4


def test_append_validates_the_body(api, game_save):
    url = f"/api/v1/saves/{game_save.save_id}/turns"
    response = api.post(url, {"player_input": 5, "state": [1, 2]})
    assert response.status_code == 400
    assert set(response.json()["error"]["details"]) == {"player_input", "narrative", "state"}
    assert Event.objects.filter(game_save=game_save).count() == 3


def test_append_needs_the_playtester_role(make_api, member_without_role, game_save):
    response = make_api(member_without_role).post(f"/api/v1/saves/{game_save.save_id}/turns", {"narrative": "x"})
    assert response.status_code == 403
    assert Event.objects.filter(game_save=game_save).count() == 3


def test_append_to_a_save_of_another_universe_is_404(api, other_universe_save):
    response = api.post(f"/api/v1/saves/{other_universe_save.save_id}/turns", {"narrative": "x"})
    assert response.status_code == 404
    assert not Event.objects.filter(game_save=other_universe_save).exists()


def test_read_one_turn(api, states):
    body = api.get(f"/api/v1/saves/{states.save_id}/turns/2").json()
    assert body["turn_id"] == 2 and body["narrative"] == "Turn 2 text." and body["state"] == {"hp": 8}
    assert api.get(f"/api/v1/saves/{states.save_id}/turns/9").status_code == 404


def test_edit_a_turns_narrative(api, game_save):
    response = api.request("PATCH", f"/api/v1/saves/{game_save.save_id}/turns/2")
    assert response.status_code == 400  # no body: narrative is required
    response = api.client.patch(
        f"/api/v1/saves/{game_save.save_id}/turns/2",
        '{"narrative": "Rewritten."}',
        content_type="application/json",
        headers={"Authorization": f"Bearer {api.key}"},
    )
    assert response.status_code == 200
    assert response.json()["narrative"] == "Rewritten."
    assert Event.objects.get(game_save=game_save, turn_id=2).narrative == "Rewritten."
    assert Job.objects.filter(game_save=game_save, kind=JobKind.EMBED_TURN, turn_id=2).exists()


def test_edit_needs_the_role_and_an_existing_turn(api, make_api, member_without_role, game_save):
    reader = make_api(member_without_role)
    response = reader.client.patch(
        f"/api/v1/saves/{game_save.save_id}/turns/2",
        '{"narrative": "x"}',
        content_type="application/json",
        headers={"Authorization": f"Bearer {reader.key}"},
    )
    assert response.status_code == 403
    response = api.client.patch(
        f"/api/v1/saves/{game_save.save_id}/turns/7",
        '{"narrative": "x"}',
        content_type="application/json",
        headers={"Authorization": f"Bearer {api.key}"},
    )
    assert response.status_code == 404
    assert Event.objects.get(game_save=game_save, turn_id=2).narrative == "Turn 2 text."


@pytest.mark.django_db(transaction=True)
def test_append_calls_the_service_outside_any_transaction(api, game_save, monkeypatch):
    """The service does vector work first (a pending rewind's delete): no open transaction."""
    from django.db import transaction

    from studio.saves import services

    seen = []
    real = services.finish_pending_vector_rollback

    def spy(*, game_save):
        seen.append(transaction.get_connection().in_atomic_block)
        return real(game_save=game_save)

    monkeypatch.setattr(services, "finish_pending_vector_rollback", spy)
    monkeypatch.setattr("studio.memory.jobs.dispatch.send", lambda job_id, countdown=0: None)
    response = api.post(f"/api/v1/saves/{game_save.save_id}/turns", {"narrative": "Four.", "turn_id": 4})
    assert response.status_code == 201 and seen == [False]
