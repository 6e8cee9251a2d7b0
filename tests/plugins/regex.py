"""The regex-key fixture (registered for the whole suite by tests/conftest.py): `limit_hits`
counts the regex searches that reached their time limit. The engine, universe and API tests
of catastrophic keys use it; the keys themselves are in tests/support/regex_bombs.py."""

from __future__ import annotations

import pytest

from studio.memory.lore_activation.regex_keys import RegexKey, RegexTimeout


@pytest.fixture
def limit_hits(monkeypatch):
    """Count the regex searches that reached their time limit (a spy on RegexKey.search)."""
    hits = []
    search = RegexKey.search

    def spy(self, *args, **kwargs):
        try:
            return search(self, *args, **kwargs)
        except RegexTimeout:
            hits.append(self.source)
            raise

    monkeypatch.setattr(RegexKey, "search", spy)
    return hits
