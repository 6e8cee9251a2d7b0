"""The API's error contract: JSON bodies with the right status for every failure."""

from __future__ import annotations

import pytest
from django.db import OperationalError
from django.test import Client

from studio.world.models import Save

from tests.plugins.api import ApiClient

from tests.support.api_errors import error_code

pytestmark = pytest.mark.django_db


def test_anonymous_requests_are_401_json_on_every_method(db):
    client = ApiClient(None)
    for method in ("GET", "POST", "DELETE"):
        response = client.request(method, "/api/v1/saves")
        assert response.status_code == 401, method
        assert error_code(response) == "not_authenticated"


def test_wrong_method_is_405_with_allow(api, game_save):
    response = api.request("DELETE", f"/api/v1/saves/{game_save.save_id}")
    assert response.status_code == 405
    assert error_code(response) == "method_not_allowed"
    assert response["Allow"] == "GET, HEAD"
    assert response.json()["error"]["details"] == {"allowed": ["GET"]}
    assert api.post(f"/api/v1/saves/{game_save.save_id}/facts").status_code == 405


def test_unknown_endpoint_is_json_404(api):
    response = api.get("/api/v1/no-such-thing")
    assert response.status_code == 404
    assert error_code(response) == "not_found"


def test_invalid_json_is_400(api, game_save):
    response = api.post(f"/api/v1/saves/{game_save.save_id}/rewind", raw=b"{turn_id: 1")
    assert response.status_code == 400
    assert error_code(response) == "invalid_json"
    assert Save.objects.get(pk=game_save.pk).current_turn == 3


def test_a_json_array_body_is_400(api, game_save):
    response = api.post(f"/api/v1/saves/{game_save.save_id}/rewind", raw=b"[1, 2]")
    assert response.status_code == 400
    assert error_code(response) == "invalid_json"


def test_non_utf8_body_is_400(api, game_save):
    response = api.post(f"/api/v1/saves/{game_save.save_id}/rewind", raw=b'{"turn_id": "\xff"}')
    assert response.status_code == 400
    assert error_code(response) == "invalid_json"


def test_wrong_content_type_is_415(api, game_save):
    response = api.post(
        f"/api/v1/saves/{game_save.save_id}/rewind", raw="turn_id=1", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 415
    assert error_code(response) == "unsupported_media_type"


def test_body_over_the_limit_is_413_and_changes_nothing(api, game_save, settings):
    settings.AXIOM_API_MAX_BODY_BYTES = 1000
    body = {"turn_id": 1, "padding": "x" * 2000}
    response = api.post(f"/api/v1/saves/{game_save.save_id}/rewind", body)
    assert response.status_code == 413
    assert error_code(response) == "body_too_large"
    assert response.json()["error"]["details"] == {"max_bytes": 1000}
    assert Save.objects.get(pk=game_save.pk).current_turn == 3


def test_body_over_the_configured_limit_is_413(api, game_save, settings):
    body = {"turn_id": 1, "padding": "x" * settings.AXIOM_API_MAX_BODY_BYTES}
    response = api.post(f"/api/v1/saves/{game_save.save_id}/rewind", body)
    assert response.status_code == 413


def test_validation_errors_list_every_field(api, game_save):
    response = api.get(f"/api/v1/saves/{game_save.save_id}/facts", {"limit": "0", "offset": "x", "max_turn_id": "-1"})
    assert response.status_code == 400
    assert error_code(response) == "validation_error"
    assert set(response.json()["error"]["details"]) == {"limit", "offset", "max_turn_id"}


def test_session_writes_need_csrf(playtester, game_save):
    client = Client(enforce_csrf_checks=True)
    client.force_login(playtester)
    assert client.get(f"/api/v1/saves/{game_save.save_id}").status_code == 200
    response = client.post(
        f"/api/v1/saves/{game_save.save_id}/rewind", '{"turn_id": 1}', content_type="application/json"
    )
    assert response.status_code == 403
    assert error_code(response) == "csrf_failed"
    assert Save.objects.get(pk=game_save.pk).current_turn == 3


def test_session_writes_with_a_csrf_token_pass(playtester, game_save):
    client = Client(enforce_csrf_checks=True)
    client.force_login(playtester)
    client.get("/accounts/tokens/")  # sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    response = client.post(
        f"/api/v1/saves/{game_save.save_id}/rewind",
        '{"turn_id": 1}',
        content_type="application/json",
        headers={"X-CSRFToken": token},
    )
    assert response.status_code == 200, response.content
    assert Save.objects.get(pk=game_save.pk).current_turn == 1


def test_token_writes_need_no_csrf(api, game_save):
    # ApiClient enforces CSRF checks; the bearer token is what makes this pass.
    response = api.post(f"/api/v1/saves/{game_save.save_id}/rewind", {"turn_id": 2})
    assert response.status_code == 200
    assert Save.objects.get(pk=game_save.pk).current_turn == 2


def test_a_locked_database_is_503_with_retry_after(api, game_save, monkeypatch):
    from studio.api import views_memory as views

    def locked(*args, **kwargs):
        raise OperationalError("database is locked")

    monkeypatch.setattr(views, "fact_list_at_turn", locked)
    response = api.get(f"/api/v1/saves/{game_save.save_id}/facts")
    assert response.status_code == 503
    assert error_code(response) == "database_busy"
    assert response["Retry-After"]


def test_an_unexpected_error_is_a_json_500(api, game_save, monkeypatch):
    from studio.api import views_memory as views

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(views, "fact_list_at_turn", broken)
    response = api.get(f"/api/v1/saves/{game_save.save_id}/facts")
    assert response.status_code == 500
    assert error_code(response) == "internal_error"
    assert "boom" not in response.content.decode()


@pytest.mark.parametrize("raw", [b'{"turn_id": NaN}', b'{"turn_id": 1, "x": Infinity}'])
def test_non_json_number_constants_are_400(api, game_save, raw):
    response = api.post(f"/api/v1/saves/{game_save.save_id}/rewind", raw=raw)
    assert response.status_code == 400
    assert error_code(response) == "invalid_json"


def test_nul_characters_are_refused_before_the_database(api, game_save):
    url = f"/api/v1/saves/{game_save.save_id}/turns"
    response = api.post(url, {"narrative": "a\x00b", "state": {"k\x00": 1}})
    assert response.status_code == 400
    assert set(response.json()["error"]["details"]) == {"narrative", "state"}
    assert api.get(f"/api/v1/saves/{game_save.save_id}/facts", {"entity": "a\x00"}).status_code == 400


@pytest.mark.parametrize("exc, status", [("http404", 404), ("denied", 403)])
def test_django_exceptions_from_shared_code_become_json(api, game_save, monkeypatch, exc, status):
    from django.core.exceptions import PermissionDenied
    from django.http import Http404

    from studio.api import views_memory as views

    def raising(*args, **kwargs):
        raise Http404("gone") if exc == "http404" else PermissionDenied("no")

    monkeypatch.setattr(views, "fact_list_at_turn", raising)
    response = api.get(f"/api/v1/saves/{game_save.save_id}/facts")
    assert response.status_code == status
    assert error_code(response) in {"not_found", "permission_denied"}
