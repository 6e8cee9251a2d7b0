"""`manage.py memory_tests`: a game's CI runs the universe's tests; the exit status says whether they held."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from studio.saves.memory_tests.models import MemoryTestResult
from studio.saves.services import turn_append
from studio.universes.memory_tests.services import memory_test_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def played(living, no_runner):
    turn_append(
        game_save=living,
        player_input="Hello.",
        narrative="Mira and Kael talk.",
        state={"present": ["Mira", "Kael"], "location": "harbour"},
    )
    living.refresh_from_db()
    memory_test_create(
        universe=living.universe, data={"name": "kael-knows", "kind": "knows", "character": "Kael", "entry": "ledger"}
    )
    return living


def run(*args) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("memory_tests", *args, stdout=out)
    except SystemExit as exc:
        return int(exc.code), out.getvalue()
    return 0, out.getvalue()


def test_passing_tests_exit_0_and_are_recorded(played):
    status, out = run("harbour")
    assert status == 0, out
    assert "PASS  kael-knows: Kael knows the entry “ledger” at turn 1: known_by names Kael." in out
    assert out.rstrip().endswith("1 test on 1 save (1 judged): passed.")
    assert MemoryTestResult.objects.filter(game_save=played, turn_id=1, verdict="pass").count() == 1


def test_a_failing_test_exits_1_with_the_records_behind_it(played):
    memory_test_create(
        universe=played.universe, data={"name": "mira-knows", "kind": "knows", "character": "Mira", "entry": "ledger"}
    )
    status, out = run("harbour", "--save", played.save_id, "--no-record")
    assert status == 1
    assert "FAIL  mira-knows: Mira does not know the entry “ledger” at turn 1: secret (known by Kael)." in out
    assert "knowledge: character='Mira' item='entry ledger'" in out
    assert "FAILED" in out and not MemoryTestResult.objects.exists()
    status, out = run("harbour", "--test", "kael-knows")
    assert status == 0 and "mira-knows" not in out


def test_a_test_that_cannot_be_judged_fails_the_run(played):
    memory_test_create(
        universe=played.universe, data={"name": "gone", "kind": "knows", "character": "Mira", "entry": "tunnel"}
    )
    played.universe.lore_entries.filter(entry_id="tunnel").delete()
    status, out = run("harbour")
    assert status == 1 and "ERROR gone: The Lore Book has no entry “tunnel”." in out


def test_json_output_is_the_apis_shape(played):
    status, out = run("harbour", "--json")
    body = json.loads(out)
    assert status == 0 and body["passed"] is True
    assert body["saves"][0]["results"][0]["verdict"] == "pass"


def test_a_mistake_in_the_command_exits_2(played):
    for args in (("nowhere",), ("harbour", "--save", "nope"), ("harbour", "--test", "nope")):
        with pytest.raises(CommandError) as caught:
            call_command("memory_tests", *args, stdout=io.StringIO())
        assert caught.value.returncode == 2


def test_a_universe_without_tests_has_nothing_to_run(cast):
    status, out = run("harbour")
    assert status == 0 and "no memory tests" in out
