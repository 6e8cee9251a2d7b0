"""Fixtures for the API tests: tokens for each role, and a client that sends them."""
from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.test import Client

from studio.api.services import api_token_create
from studio.saves.models import Save, StateCache
from studio.universes.models import Universe


class ApiClient:
    """A test client that sends a bearer key and JSON bodies."""

    def __init__(self, key: str | None = None, *, enforce_csrf_checks: bool = True):
        # CSRF checks on: a bearer-token request must pass without a CSRF token.
        self.client = Client(enforce_csrf_checks=enforce_csrf_checks)
        self.key = key

    def _headers(self, extra=None):
        headers = dict(extra or {})
        if self.key is not None:
            headers.setdefault("Authorization", f"Bearer {self.key}")
        return headers

    def get(self, path, params=None, headers=None):
        return self.client.get(path, params or {}, headers=self._headers(headers))

    def post(self, path, body=None, headers=None, raw: bytes | str | None = None, content_type="application/json"):
        data = raw if raw is not None else json.dumps(body if body is not None else {})
        return self.client.post(path, data, content_type=content_type, headers=self._headers(headers))

    def request(self, method, path, headers=None):
        return getattr(self.client, method.lower())(path, headers=self._headers(headers))


@pytest.fixture
def make_api():
    def make(user: User | None, name: str = "test") -> ApiClient:
        if user is None:
            return ApiClient(None)
        _, key = api_token_create(user=user, name=name)
        return ApiClient(key)

    return make


@pytest.fixture
def api(make_api, playtester):
    """A playtester's API client (member of `universe`)."""
    return make_api(playtester)


@pytest.fixture
def member_without_role(db, universe) -> User:
    """A member of the universe in no group: may read, may not write."""
    user = User.objects.create_user("reader", password="pw")
    universe.members.add(user)
    return user


@pytest.fixture
def other_universe_save(db) -> Save:
    """A save in a universe the fixture users do not belong to."""
    other = Universe.objects.create(name="Elsewhere", slug="elsewhere")
    return Save.objects.create(universe=other, name="Hidden", save_id="hiddensave")


@pytest.fixture
def states(game_save):
    for turn in range(1, 4):
        StateCache.objects.create(game_save=game_save, turn_id=turn, state={"hp": 10 - turn})
    return game_save


def error_code(response) -> str:
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    body = response.json()
    assert set(body["error"]) == {"code", "message", "details"}, body
    return body["error"]["code"]
