"""Request bodies the JSON parser accepts but nothing behind it can handle: 400, never 500.

A lone UTF-16 surrogate (`"\\ud800"`) is valid JSON syntax but not Unicode: no database can
store it and UTF-8 cannot encode it. JSON nested deeper than Python's recursion limit makes the
parser raise RecursionError. Both are refused where every body is parsed (`json_body`), with
the API's one error shape, before any view reads a field.
"""

from __future__ import annotations

import json

import pytest

from studio.api.http import MAX_JSON_DEPTH
from studio.world.models import Event, Save

from tests.support.api_errors import error_code

pytestmark = pytest.mark.django_db

LONE = "\\ud800"  # as it travels in JSON text: the escape, not a character


def error_body(response) -> dict:
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    return body["error"]


def endpoints(game_save) -> list[tuple[str, str, str]]:
    """(method, path, JSON text with a lone surrogate in the string field the endpoint reads)."""
    base = f"/api/v1/saves/{game_save.save_id}"
    return [
        ("POST", "/api/v1/saves", f'{{"universe": "{game_save.universe.slug}", "name": "Mira {LONE}"}}'),
        ("POST", f"{base}/turns", f'{{"expected_current_turn": 3, "narrative": "Mira {LONE} waits."}}'),
        ("POST", f"{base}/turns", f'{{"expected_current_turn": 3, "narrative": "ok", "player_input": "{LONE}"}}'),
        ("POST", f"{base}/turns", f'{{"expected_current_turn": 3, "narrative": "ok", "state": {{"where": "{LONE}"}}}}'),
        ("POST", f"{base}/turns", f'{{"expected_current_turn": 3, "narrative": "ok", "state": {{"k{LONE}": 1}}}}'),
        ("PATCH", f"{base}/turns/1", f'{{"narrative": "{LONE}"}}'),
        ("POST", f"{base}/query", f'{{"query_text": "Mira {LONE}"}}'),
        ("POST", f"{base}/query", f'{{"query_text": "Mira", "focus_terms": ["{LONE}"]}}'),
        ("POST", f"{base}/context", f'{{"query_text": "Mira {LONE}"}}'),
        ("POST", f"{base}/narrate", f'{{"player_input": "I ask {LONE}"}}'),
        ("POST", f"{base}/fork", f'{{"turn_id": 2, "name": "fork {LONE}"}}'),
        ("POST", f"{base}/rewind", f'{{"turn_id": 2, "expected_current_turn": 3, "note": "{LONE}"}}'),
    ]


def send(api, method: str, path: str, raw: str):
    if method == "PATCH":
        return api.client.patch(path, raw, content_type="application/json", headers=api._headers())
    return api.post(path, raw=raw)


def test_a_lone_surrogate_in_any_body_string_is_400_and_changes_nothing(api, game_save):
    saves, events = Save.objects.count(), Event.objects.count()
    for method, path, raw in endpoints(game_save):
        json.loads(raw)  # valid JSON text: the parser alone would accept it
        response = send(api, method, path, raw)
        assert response.status_code == 400, (method, path, raw, response.content[:300])
        error = error_body(response)
        assert error["code"] == "validation_error", (path, error)
        assert "lone UTF-16 surrogate" in json.dumps(error["details"]), (path, error)
    assert Save.objects.count() == saves and Event.objects.count() == events
    game_save.refresh_from_db()
    assert game_save.current_turn == 3


def test_the_error_names_where_the_surrogate_is(api, game_save):
    raw = f'{{"expected_current_turn": 3, "narrative": "ok", "state": {{"party": [{{"name": "{LONE}"}}]}}}}'
    response = api.post(f"/api/v1/saves/{game_save.save_id}/turns", raw=raw)
    assert response.status_code == 400
    assert error_body(response)["details"] == {
        "state.party[0].name": ["Contains a lone UTF-16 surrogate, which is not valid Unicode."]
    }


def test_a_surrogate_pair_is_an_ordinary_character(api, game_save):
    """The escape pair of one character outside the BMP is fine: only an unpaired half is refused."""
    raw = '{"expected_current_turn": 3, "narrative": "A lantern \\ud83c\\udfee glows."}'
    response = api.post(f"/api/v1/saves/{game_save.save_id}/turns", raw=raw)
    assert response.status_code == 201, response.content[:300]
    assert Event.objects.get(game_save=game_save, turn_id=4).narrative == "A lantern \U0001f3ee glows."


@pytest.mark.parametrize("depth", [200_000, 5_000, MAX_JSON_DEPTH + 1])
@pytest.mark.parametrize("bracket", ["[]", "{}"])
def test_json_nested_too_deeply_is_400(api, game_save, settings, depth, bracket):
    settings.AXIOM_API_MAX_BODY_BYTES = 4 * 1024 * 1024  # room for 200,000 levels
    opening, closing = bracket
    inner = (('{"a":' * depth) + "1" + ("}" * depth)) if opening == "{" else ("[" * depth + "]" * depth)
    raw = f'{{"expected_current_turn": 3, "narrative": "ok", "state": {{"deep": {inner}}}}}'
    response = api.post(f"/api/v1/saves/{game_save.save_id}/turns", raw=raw)
    assert response.status_code == 400, response.content[:300]
    error = error_body(response)
    assert error["code"] == "invalid_json"
    assert f"nested more than {MAX_JSON_DEPTH} levels" in error["message"]
    assert error["details"] == {"max_depth": MAX_JSON_DEPTH}
    assert Event.objects.filter(game_save=game_save).count() == 3


def test_nesting_up_to_the_limit_is_accepted(api, game_save):
    depth = MAX_JSON_DEPTH - 2  # the body object and "state" are two levels
    inner = "[" * depth + "]" * depth
    raw = f'{{"expected_current_turn": 3, "narrative": "ok", "state": {{"deep": {inner}}}}}'
    response = api.post(f"/api/v1/saves/{game_save.save_id}/turns", raw=raw)
    assert response.status_code == 201, response.content[:300]


def test_a_deep_body_is_refused_on_a_read_endpoint_too(api, game_save):
    raw = '{"query_text": "Mira", "focus_terms": ' + "[" * 200_000 + "]" * 200_000 + "}"
    response = api.post(f"/api/v1/saves/{game_save.save_id}/query", raw=raw)
    assert response.status_code == 400
    assert error_code(response) == "invalid_json"
