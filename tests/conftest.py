"""Shared fixtures: users in each role, a universe with lore, a save with turns.

Fixtures more than one test folder uses live in plugin modules registered here once
(`pytest_plugins`), so no test module imports a fixture: the vector store doubles of
tests/fakes.py (`fake_vectors`, `vector_memory`, `stricter_clamp`), the job fixtures
(tests/plugins/jobs.py: `eager_jobs`, `llm_server`, `living_universe`), the scripted narrator
(tests/plugins/narrator.py: `narrator`, `meta`), the demo save (tests/plugins/demo.py: `demo`) and
the API client (tests/plugins/api.py: `make_api`). Each test folder's conftest.py holds what only
its tests share."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from studio.roles import AUTHORS, PLAYTESTERS
from studio.saves.models import Event, Save
from studio.universes.models import LoreEntry, Universe, UniverseMeta

pytest_plugins = [
    "tests.fakes",
    "tests.plugins.jobs",
    "tests.plugins.narrator",
    "tests.plugins.demo",
    "tests.plugins.api",
]


@pytest.fixture
def staff_user(db) -> User:
    return User.objects.create_user("staff", password="pw", is_staff=True, is_superuser=True)


@pytest.fixture
def author(db) -> User:
    user = User.objects.create_user("author", password="pw")
    user.groups.add(Group.objects.get_or_create(name=AUTHORS)[0])
    return user


@pytest.fixture
def playtester(db) -> User:
    user = User.objects.create_user("playtester", password="pw")
    user.groups.add(Group.objects.get_or_create(name=PLAYTESTERS)[0])
    return user


@pytest.fixture
def outsider(db) -> User:
    """A logged-in user in no group who belongs to no universe."""
    return User.objects.create_user("outsider", password="pw")


@pytest.fixture
def universe(db, author, playtester) -> Universe:
    u = Universe.objects.create(name="Test World", slug="test-world", owner=author)
    u.members.add(playtester)
    UniverseMeta.objects.create(universe=u, key="belief_mission", value="Remember debts.")
    kael = LoreEntry.objects.create(
        universe=u, entry_id="kael", title="Kaël", kind="character", text="Kaël is a smuggler."
    )
    port = LoreEntry.objects.create(
        universe=u, entry_id="port-vey", title="Port Vey", kind="place", text="A harbour town."
    )
    kael.links.add(port)
    return u


@pytest.fixture
def game_save(db, universe) -> Save:
    save = Save.objects.create(universe=universe, name="Run 1", save_id="testsave01")
    for turn in range(1, 4):
        Event.objects.create(
            game_save=save, turn_id=turn, player_input=f"input {turn}", narrative=f"Turn {turn} text."
        )
    save.current_turn = 3
    save.save()
    return save
