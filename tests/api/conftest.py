"""Fixtures for the API tests: a client for each role (`make_api` and `ApiClient` are in
tests/plugins/api.py, shared with the memory tests)."""

from __future__ import annotations


import pytest
from django.contrib.auth.models import User

from studio.world.models import Save, StateCache, Universe


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
