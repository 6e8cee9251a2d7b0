"""The universe's Tests page: write a test (errors beside their fields, nothing half-written), change its kind,
edit and delete it, run the tests on a save or every save and read why each passed or failed (full page and
htmx fragments; authors write, playtesters run)."""

from __future__ import annotations

import html

import pytest
from django.test import Client
from django.urls import reverse

from studio.saves.memory_tests.models import MemoryTestResult
from studio.saves.services import turn_append
from studio.universes.memory_tests.services import memory_test_create
from studio.universes.models import MemoryTest

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def page(cast):
    return reverse("memory:universe_tests", kwargs={"slug": cast.slug})


@pytest.fixture
def played(living, no_runner):
    turn_append(
        game_save=living,
        player_input="Hello.",
        narrative="Mira and Kael talk.",
        state={"present": ["Mira", "Kael"], "location": "harbour"},
    )
    living.refresh_from_db()
    return living


def save_url(universe) -> str:
    return reverse("memory:universe_test_save", kwargs={"slug": universe.slug})


def test_the_page_and_its_fragment(author, cast, page):
    memory_test_create(
        universe=cast, data={"name": "kael-knows", "kind": "knows", "character": "Kael", "entry": "ledger"}
    )
    client = logged_in(author)
    full = client.get(page).content.decode()
    assert "<h1>Memory tests</h1>" in full and 'aria-current="page">Tests</a>' in full
    assert "At or after turn 0, Kael knows the entry “ledger”." in html.unescape(full)
    assert 'name="character"' in full  # the form shows the fields of the default kind, knows
    fragment = client.get(page, {"kind": "context", "name": "typed-name", "part": "form"}, **HTMX).content.decode()
    assert fragment.lstrip().startswith('<section class="card" id="test-form"')
    assert 'name="action"' in fragment and 'name="character"' not in fragment
    assert 'value="typed-name"' in fragment  # the common fields carry over a change of kind


def test_write_a_test_then_edit_and_delete_it(author, cast, page):
    client = logged_in(author)
    answer = client.post(
        save_url(cast),
        {
            "kind": "knows",
            "name": "mira-knows",
            "turn": "2",
            "character": "Mira",
            "knows": "true",
            "entry": "ledger",
            "fact": "",
        },
        **HTMX,
    )
    body = html.unescape(answer.content.decode())
    assert answer.status_code == 200 and "Added the test “mira-knows”." in body
    assert body.lstrip().startswith('<div id="tests-panel">')
    test = MemoryTest.objects.get(name="mira-knows")
    assert (test.turn, test.params["character"], test.params["knows"]) == (2, "Mira", True)
    edit = client.get(page, {"edit": "mira-knows"}).content.decode()
    assert 'name="original" value="mira-knows"' in edit and 'value="Mira"' in edit
    answer = client.post(
        save_url(cast),
        {
            "kind": "knows",
            "original": "mira-knows",
            "name": "mira-ignores",
            "character": "Mira",
            "knows": "false",
            "entry": "ledger",
        },
    )
    assert answer.status_code == 302  # without htmx: a redirect with the message
    assert list(MemoryTest.objects.values_list("name", flat=True)) == ["mira-ignores"]
    assert MemoryTest.objects.get().params["knows"] is False
    delete = reverse("memory:universe_test_delete", kwargs={"slug": cast.slug, "test_name": "mira-ignores"})
    assert "Deleted the test" in html.unescape(client.post(delete, **HTMX).content.decode())
    assert not MemoryTest.objects.exists()


def test_a_refused_test_shows_each_error_beside_its_field_and_writes_nothing(author, cast, page):
    client = logged_in(author)
    answer = client.post(
        save_url(cast),
        {"kind": "knows", "name": "bad name", "turn": "x", "character": "", "knows": "true", "entry": "nowhere"},
    )
    body = html.unescape(answer.content.decode())
    assert answer.status_code == 400 and "Nothing was saved" in body
    assert 'id="test-name-errors"' in body and "must be a slug" in body
    assert 'id="test-turn-errors"' in body and "must be a whole number" in body
    assert 'id="test-character-errors"' in body and "is required" in body
    assert 'value="nowhere"' in body  # what was typed stays
    assert not MemoryTest.objects.exists()
    unknown = client.post(
        save_url(cast), {"kind": "knows", "name": "ok", "character": "Mira", "entry": "nowhere"}, **HTMX
    )
    assert "“nowhere” is not an entry_id" in html.unescape(unknown.content.decode())
    assert not MemoryTest.objects.exists()


def test_run_on_a_save_shows_each_verdict_with_the_records_behind_it(playtester, cast, played, page):
    memory_test_create(
        universe=cast, data={"name": "kael-knows", "kind": "knows", "character": "Kael", "entry": "ledger"}
    )
    memory_test_create(
        universe=cast, data={"name": "mira-knows", "kind": "knows", "character": "Mira", "entry": "ledger"}
    )
    client = logged_in(playtester)
    assert client.post(save_url(cast), {"kind": "knows", "name": "x"}).status_code == 403  # playtesters run, not write
    run = reverse("memory:universe_tests_run", kwargs={"slug": cast.slug})
    body = html.unescape(client.post(run, {"save": played.save_id}, **HTMX).content.decode())
    assert "Ran 2 test(s) on 1 save(s): 2 judged, 1 failed." in body
    assert 'data-result="mira-knows" data-verdict="fail"' in body
    assert "Mira does not know the entry “ledger” at turn 1: secret (known by Kael)." in body
    assert "<dt>knowledge</dt>" in body and '<span class="muted">why</span> secret (known by Kael)' in body
    assert MemoryTestResult.objects.filter(game_save=played, turn_id=1).count() == 2
    # Later turns: the results as they stood at turn 1 stay reachable.
    turn_append(game_save=played, player_input="On.", narrative="More.", state={})
    played.refresh_from_db()
    assert client.post(run, {"save": "all"}).status_code == 302
    latest = html.unescape(client.get(page).content.decode())
    assert "Recorded at turn 2." in latest and "turn 1</a>" in latest
    earlier = html.unescape(client.get(page, {"save": played.save_id, "turn": "1"}).content.decode())
    assert "Recorded at turn 1 (as it stood at turn 1)." in earlier


def test_who_may_see_and_run(outsider, playtester, cast, page):
    assert logged_in(outsider).get(page).status_code == 404
    client = logged_in(playtester)
    body = client.get(page).content.decode()
    assert "Run the tests" in body and 'id="test-form"' not in body
    run = reverse("memory:universe_tests_run", kwargs={"slug": cast.slug})
    assert "Write a test first" in html.unescape(client.post(run, {"save": "all"}, **HTMX).content.decode())
