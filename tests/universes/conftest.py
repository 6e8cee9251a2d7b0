"""Fixtures for the authoring studio tests."""

from __future__ import annotations

import pytest

from studio.universes import services


@pytest.fixture
def author_client(client, author):
    client.force_login(author)
    return client


@pytest.fixture
def htmx():
    """Extra headers that make a test-client request look like htmx."""
    return {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def sync_calls(monkeypatch):
    """Record sync_lore enqueues instead of running the jobs module."""
    calls: list[int] = []
    monkeypatch.setattr(services.lore, "_sync_lore_now", lambda universe_pk: calls.append(universe_pk))
    return calls
