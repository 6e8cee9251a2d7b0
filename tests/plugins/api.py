"""An API client that sends a bearer key and JSON bodies, and `make_api` (a client for a user),
registered for the whole suite by tests/conftest.py (`pytest_plugins`): the API and memory tests use it."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.test import Client

from studio.api.services import api_token_create


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
