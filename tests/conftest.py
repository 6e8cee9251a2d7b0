"""Shared fixtures: users in each role, a universe with lore, a save with turns.

Fixtures more than one test folder uses live in plugin modules registered here once
(`pytest_plugins`), so no test module imports a fixture: the vector store doubles of
tests/fakes.py (`fake_vectors`, `vector_memory`, `stricter_clamp`), the job fixtures
(tests/plugins/jobs.py: `eager_jobs`, `llm_server`, `living_universe`), the scripted narrator
(tests/plugins/narrator.py: `narrator`, `meta`), the demo save (tests/plugins/demo.py: `demo`),
the API client (tests/plugins/api.py: `make_api`), the client's connection as gunicorn hands it
over (tests/plugins/client.py: `gunicorn_client`), the who-knows-what worlds
(tests/plugins/knowledge.py) and the regex searches past their limit (tests/plugins/regex.py:
`limit_hits`). Each test folder's conftest.py holds what only its tests share. Plain helpers more
than one test module uses (no fixtures) live in tests/support/; no module imports a test module
(tests/test_no_test_imports.py)."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from django.contrib.auth.models import Group, User

from studio.roles import AUTHORS, PLAYTESTERS
from studio.world.models import Event, LoreEntry, Save, Universe, UniverseMeta

pytest_plugins = [
    "tests.fakes",
    "tests.plugins.jobs",
    "tests.plugins.narrator",
    "tests.plugins.demo",
    "tests.plugins.api",
    "tests.plugins.client",
    "tests.plugins.knowledge",
    "tests.plugins.regex",
]


# Hypothesis, once for the suite (tests that need fewer examples say `@settings(max_examples=N)`).
# Both profiles run 60 examples, without a deadline (a test's first example pays for migrations
# and imports) and with function-scoped fixtures allowed (each example re-uses the test's
# database rows on purpose; the property tests reset what they touch). `ci` (loaded when CI=true)
# is derandomised, so a red run is the same run again; `dev` explores new examples each run and
# keeps the failing ones in .hypothesis/. HYPOTHESIS_PROFILE=<name> picks one explicitly.
_HYPOTHESIS = dict(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
hypothesis_settings.register_profile("dev", **_HYPOTHESIS)
hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True, **_HYPOTHESIS)
hypothesis_settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI", "").lower() == "true" else "dev")
)


# `--db-only` (scripts/test.sh's PostgreSQL run): keep only the tests that touch the database.
# The others (pure engine, embeddings, lexical search, parsing, subprocess checks) give the same
# answer on any database and have already run in the SQLite run, so nothing is dropped.
DB_FIXTURES = {"db", "transactional_db", "live_server", "django_db_reset_sequences", "django_db_serialized_rollback"}


def pytest_addoption(parser):
    parser.addoption(
        "--db-only",
        action="store_true",
        default=False,
        help="run only the tests that use the database (django_db marker or a db fixture); "
        "the others are deselected (scripts/test.sh runs them on SQLite)",
    )


def uses_database(item) -> bool:
    return item.get_closest_marker("django_db") is not None or bool(
        DB_FIXTURES & set(getattr(item, "fixturenames", ()))
    )


# The long tests (a browser, a Celery worker, the real model or its export: markers browser,
# celery, slow) are handed to the workers first, so that with two workers no minute-long test
# starts last while the other worker sits idle. A stable sort: the order within each group,
# and so each module's tests, stays as collected.
LONG_MARKERS = ("browser", "celery", "slow")


def is_long(item) -> bool:
    return any(item.get_closest_marker(name) is not None for name in LONG_MARKERS)


def pytest_collection_modifyitems(config, items):
    if config.getoption("--db-only"):
        kept = [item for item in items if uses_database(item)]
        dropped = [item for item in items if not uses_database(item)]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept
    items.sort(key=lambda item: not is_long(item))


def pytest_report_header(config):
    if config.getoption("--db-only"):
        return "--db-only: tests that use no database are deselected (they run in the SQLite run)"
    return None


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
        Event.objects.create(game_save=save, turn_id=turn, player_input=f"input {turn}", narrative=f"Turn {turn} text.")
    save.current_turn = 3
    save.save()
    return save
