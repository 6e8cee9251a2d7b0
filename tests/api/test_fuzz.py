"""Arbitrary bodies and parameters never crash the API, and a refused write changes nothing."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from studio.world.models import Event, Save

pytestmark = pytest.mark.django_db

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
FIELDS = [
    "narrative",
    "player_input",
    "state",
    "turn_id",
    "name",
    "universe",
    "memory_mode",
    "query_text",
    "k",
    "expected_current_turn",
    "beliefs_enabled",
]
bodies = st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=6)


@given(body=bodies)
def test_append_turn_with_any_body(api, game_save, body):
    before = Event.objects.filter(game_save=game_save).count()
    response = api.post(f"/api/v1/saves/{game_save.save_id}/turns", body)
    assert response.status_code in (201, 400, 409), response.content[:300]
    after = Event.objects.filter(game_save=game_save).count()
    assert after == before + (1 if response.status_code == 201 else 0)
    if response.status_code == 400:
        assert response.json()["error"]["details"]


@given(body=bodies)
def test_rewind_with_any_body(api, game_save, body):
    save = Save.objects.get(pk=game_save.pk)
    response = api.post(f"/api/v1/saves/{game_save.save_id}/rewind", body)
    assert response.status_code in (200, 400, 409), response.content[:300]
    if response.status_code != 200:
        assert Save.objects.get(pk=game_save.pk).current_turn == save.current_turn


@given(body=bodies)
def test_create_save_with_any_body(api, universe, body):
    before = Save.objects.count()
    response = api.post("/api/v1/saves", body)
    assert response.status_code in (201, 400, 404), response.content[:300]
    assert Save.objects.count() == before + (1 if response.status_code == 201 else 0)


@given(raw=st.binary(max_size=200))
def test_any_bytes_as_a_body(api, game_save, raw):
    response = api.post(f"/api/v1/saves/{game_save.save_id}/rewind", raw=raw)
    assert response.status_code in (200, 400, 409), response.content[:300]
    assert response["Content-Type"] == "application/json"


@given(
    params=st.dictionaries(
        st.sampled_from(["limit", "offset", "max_turn_id", "entity", "subject", "trend", "stale", "status", "turn_id"]),
        st.text(max_size=12),
        max_size=5,
    )
)
def test_any_query_string(api, game_save, params):
    for path in ("facts", "beliefs", "mental-models", "jobs", "turns"):
        response = api.get(f"/api/v1/saves/{game_save.save_id}/{path}", params)
        assert response.status_code in (200, 400), (path, params, response.content[:300])
        json.loads(response.content)
