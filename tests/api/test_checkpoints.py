"""Rewind, rewind preview and fork through the API."""

from __future__ import annotations

import pytest

from studio.memory import facts as F
from studio.world.models import Event, Save

from tests.support.api_errors import error_code

pytestmark = pytest.mark.django_db


def test_rewind_removes_later_turns(api, game_save):
    F.insert_facts(game_save.save_id, 3, [F.Fact(statement="Late fact.")])
    response = api.post(f"/api/v1/saves/{game_save.save_id}/rewind", {"turn_id": 1})
    assert response.status_code == 200
    body = response.json()
    assert body["changed"] is True and body["from_turn"] == 3 and body["target_turn"] == 1
    assert body["counts"]["events"] == 2 and body["counts"]["facts"] == 1
    assert body["save"]["current_turn"] == 1 and body["save"]["timeline_generation"] == 1
    assert list(Event.objects.filter(game_save=game_save).values_list("turn_id", flat=True)) == [1]


def test_rewind_to_the_current_turn_changes_nothing(api, game_save):
    body = api.post(f"/api/v1/saves/{game_save.save_id}/rewind", {"turn_id": 3}).json()
    assert body["changed"] is False
    assert Save.objects.get(pk=game_save.pk).timeline_generation == 0


def test_rewind_into_the_future_is_409(api, game_save):
    response = api.post(f"/api/v1/saves/{game_save.save_id}/rewind", {"turn_id": 9})
    assert response.status_code == 409
    assert error_code(response) == "conflict"
    assert response.json()["error"]["details"] == {"current_turn": 3}


def test_rewind_with_a_stale_expected_turn_is_409(api, game_save):
    response = api.post(f"/api/v1/saves/{game_save.save_id}/rewind", {"turn_id": 1, "expected_current_turn": 5})
    assert response.status_code == 409
    assert Event.objects.filter(game_save=game_save).count() == 3


@pytest.mark.parametrize("body", [{}, {"turn_id": -1}, {"turn_id": "2"}, {"turn_id": True}, {"turn_id": 1.5}])
def test_rewind_validates_the_turn(api, game_save, body):
    response = api.post(f"/api/v1/saves/{game_save.save_id}/rewind", body)
    assert response.status_code == 400
    assert "turn_id" in response.json()["error"]["details"]
    assert Event.objects.filter(game_save=game_save).count() == 3


def test_rewind_needs_the_playtester_role(make_api, member_without_role, game_save):
    response = make_api(member_without_role).post(f"/api/v1/saves/{game_save.save_id}/rewind", {"turn_id": 1})
    assert response.status_code == 403
    assert error_code(response) == "permission_denied"
    assert Event.objects.filter(game_save=game_save).count() == 3


def test_rewind_preview_changes_nothing(api, game_save):
    F.insert_facts(game_save.save_id, 2, [F.Fact(statement="Fact two.")])
    body = api.get(f"/api/v1/saves/{game_save.save_id}/rewind-preview", {"turn_id": 1}).json()
    assert body["changed"] is True
    assert body["counts"]["events"] == 2 and body["counts"]["facts"] == 1
    assert "beliefs_deleted" in body and "mental_models_changed" in body
    assert Event.objects.filter(game_save=game_save).count() == 3


def test_rewind_preview_is_a_read(make_api, member_without_role, game_save):
    response = make_api(member_without_role).get(f"/api/v1/saves/{game_save.save_id}/rewind-preview", {"turn_id": 1})
    assert response.status_code == 200


def test_rewind_preview_needs_a_turn(api, game_save):
    response = api.get(f"/api/v1/saves/{game_save.save_id}/rewind-preview")
    assert response.status_code == 400
    assert api.get(f"/api/v1/saves/{game_save.save_id}/rewind-preview", {"turn_id": 7}).status_code == 409


def test_fork_copies_up_to_the_turn(api, game_save):
    response = api.post(f"/api/v1/saves/{game_save.save_id}/fork", {"turn_id": 2, "name": "What if"})
    assert response.status_code == 201
    body = response.json()
    assert body["name"] == "What if" and body["forked_from"] == "testsave01" and body["fork_turn"] == 2
    assert body["current_turn"] == 2
    fork = Save.objects.get(save_id=body["save_id"])
    assert list(fork.events.values_list("turn_id", flat=True)) == [1, 2]
    assert Event.objects.filter(game_save=game_save).count() == 3


def test_fork_defaults_to_the_current_turn(api, game_save):
    body = api.post(f"/api/v1/saves/{game_save.save_id}/fork").json()
    assert body["fork_turn"] == 3 and body["name"].startswith("Run 1")


def test_fork_into_the_future_is_409_and_needs_the_role(api, make_api, member_without_role, game_save):
    assert api.post(f"/api/v1/saves/{game_save.save_id}/fork", {"turn_id": 4}).status_code == 409
    assert make_api(member_without_role).post(f"/api/v1/saves/{game_save.save_id}/fork").status_code == 403
    assert Save.objects.count() == 1


def test_rewind_checks_the_expected_turn_in_the_service(api, game_save, monkeypatch):
    from studio.saves.checkpoints import CheckpointManager

    seen = []
    real = CheckpointManager.rewind

    def spy(self, save, target_turn, *, expected_current_turn=None):
        seen.append(expected_current_turn)
        return real(self, save, target_turn, expected_current_turn=expected_current_turn)

    monkeypatch.setattr(CheckpointManager, "rewind", spy)
    url = f"/api/v1/saves/{game_save.save_id}/rewind"
    stale = api.post(url, {"turn_id": 1, "expected_current_turn": 2})
    assert stale.status_code == 409 and error_code(stale) == "conflict"
    assert stale.json()["error"]["details"] == {"current_turn": 3}
    assert "changed since you read it" in stale.json()["error"]["message"]
    assert api.post(url, {"turn_id": 1, "expected_current_turn": 3}).status_code == 200
    assert seen == [2, 3]
    assert list(Event.objects.filter(game_save=game_save).values_list("turn_id", flat=True)) == [1]
