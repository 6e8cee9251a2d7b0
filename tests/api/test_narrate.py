"""POST /api/v1/saves/{save_id}/narrate: a proposal from the narrator, nothing appended."""

from __future__ import annotations

import pytest

from studio.memory.models import LLMCall
from studio.saves.models import NarratorDraft
from studio.world.models import Event
from tests.plugins.narrator import STORY

pytestmark = pytest.mark.django_db


def test_api_narrate_proposes_without_appending(game_save, meta, narrator, api):
    response = api.post(f"/api/v1/saves/{game_save.save_id}/narrate", {"player_input": "I light a lamp"})
    body = response.json()
    assert response.status_code == 200, body
    assert body["narrative"] == STORY and body["turn_id"] == 4 and body["appended"] is False
    assert "Wren Halloway" in body["prompt"]["system"] and body["context"]["token_budget"] == 2000
    assert Event.objects.filter(game_save=game_save).count() == 3 and not NarratorDraft.objects.exists()
    assert LLMCall.objects.filter(game_save=game_save, operation="narrate").count() == 1


def test_api_narrate_without_a_model_is_503(game_save, api, settings):
    settings.AXIOM_LLM_BASE_URL = ""
    response = api.post(f"/api/v1/saves/{game_save.save_id}/narrate", {"player_input": "I light a lamp"})
    assert response.status_code == 503 and response.json()["error"]["code"] == "no_model"


def test_api_narrate_over_the_spend_guard_is_429(game_save, api, narrator, settings):
    settings.AXIOM_LLM_CALLS_PER_HOUR = 1
    LLMCall.objects.create(game_save=game_save, operation="extract", model="test-model")
    response = api.post(f"/api/v1/saves/{game_save.save_id}/narrate", {"player_input": "I light a lamp"})
    assert response.status_code == 429 and response.json()["error"]["code"] == "spend_limit"
    assert 1 <= int(response["Retry-After"]) <= 3600  # the guard's hour, in whole seconds


def test_api_narrate_with_a_nul_character_is_400(game_save, narrator, api):
    response = api.post(f"/api/v1/saves/{game_save.save_id}/narrate", {"player_input": "I light\x00 a lamp"})
    assert response.status_code == 400, response.content
    assert not LLMCall.objects.filter(game_save=game_save, operation="narrate").exists()
