"""Memory-test results are rows of the turn: a rewind to N shows them as they stood at N, a fork at N starts
with exactly those, and the save file carries them (property over random play, runs and test edits)."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from studio.memory import timeline
from studio.memory.facts import Fact, insert_facts
from studio.memory.knowledge.reveals import reveal_add
from studio.saves import portable
from studio.saves.checkpoints import CheckpointManager
from studio.saves.memory_tests.models import MemoryTestResult
from studio.saves.memory_tests.selectors import result_turns, results_as_of
from studio.saves.memory_tests.services import memory_tests_run
from studio.world.models import Save
from studio.saves.services import turn_append
from studio.universes.memory_tests.services import memory_test_create, memory_test_update
from tests.fakes import FakeVectorMemory

pytestmark = pytest.mark.django_db

NAMES = ["Mira", "Kael", "Ivo"]
_ids = itertools.count()
COLUMNS = ("turn_id", "name", "kind", "definition", "verdict", "summary", "explain", "ran_at")


def rows(save: Save) -> list[tuple]:
    return [
        tuple(json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v for v in row)
        for row in MemoryTestResult.objects.filter(game_save=save).order_by("turn_id", "name").values_list(*COLUMNS)
    ]


def shown(save: Save) -> tuple:
    """What the Tests page and the API show for the save now: the latest run's verdicts and summaries."""
    turn, results = results_as_of(game_save=save)
    return turn, [(r.name, r.verdict, r.summary) for r in results]


@pytest.fixture
def tests(cast):
    return [
        memory_test_create(
            universe=cast,
            data={"name": "mira-ledger", "kind": "knows", "character": "Mira", "entry": "ledger", "turn": 1},
        ),
        memory_test_create(
            universe=cast,
            data={"name": "ivo-crowns", "kind": "knows", "character": "Ivo", "fact": "crowns", "knows": False},
        ),
        memory_test_create(universe=cast, data={"name": "no-leaks", "kind": "no_findings", "turn": 2}),
    ]


def play(data, save):
    present = data.draw(st.lists(st.sampled_from(NAMES), max_size=3, unique=True), label="present")
    turn = turn_append(game_save=save, player_input="go", narrative="...", state={"present": present}).turn_id
    if data.draw(st.booleans(), label="fact?"):
        insert_facts(save.save_id, turn, [Fact(f"Kael owes {next(_ids)} crowns.")])
    if data.draw(st.integers(0, 3), label="reveal?") == 0:
        reveal_add(game_save=save, turn_id=turn, character="Mira", entry_id="ledger", told_by="Kael")


@settings(max_examples=15, phases=[Phase.explicit, Phase.reuse, Phase.generate])  # each example plays turns
@given(data=st.data())
def test_rewind_and_fork_keep_the_results_exact(cast, tests, no_runner, data):
    save = Save.objects.create(universe=cast, name="P", save_id=f"mt{next(_ids)}", memory_mode="living")
    recorded = {0: (rows(save), shown(save))}
    for _ in range(data.draw(st.integers(1, 6), label="turns")):
        play(data, save)
        save.refresh_from_db()
        if data.draw(st.booleans(), label="run?"):
            if data.draw(st.integers(0, 3), label="edit a test?") == 0:  # results keep the test as it ran
                memory_test_update(test=tests[0], data={**tests[0].spec.as_dict(), "turn": save.current_turn})
            memory_tests_run(game_save=save)
        recorded[save.current_turn] = (rows(save), shown(save))
    n = data.draw(st.integers(0, save.current_turn), label="n")
    manager = CheckpointManager(vector_memory=FakeVectorMemory())
    fork = manager.fork(save, n)
    assert (rows(fork), shown(fork)) == recorded[n]
    assert manager.preview(save, n).counts.get("memory_test_results", 0) == len(rows(save)) - len(recorded[n][0])
    manager.rewind(save, n)
    save.refresh_from_db()
    assert (rows(save), shown(save)) == recorded[n]
    # The save file carries them: an imported copy shows the same results.
    copy = portable.save_import(universe=cast, data=portable.save_export(game_save=save).read()).game_save
    assert (rows(copy), shown(copy)) == recorded[n]


def test_the_table_is_registered_with_its_save_file_section():
    table = timeline.table("memory_test_results")
    assert table.section == "memory_test_results" and table.copy is not None
    assert "memory_test_results" in [section.name for section in portable.registered_sections()]


def test_results_as_of_an_earlier_turn_and_the_turns_with_results(cast, tests, no_runner):
    save = Save.objects.create(universe=cast, name="P", save_id="mtturns", memory_mode="living")
    turn_append(game_save=save, player_input="go", narrative="...", state={"present": ["Mira", "Kael"]})
    memory_tests_run(game_save=save)
    turn_append(game_save=save, player_input="go", narrative="...", state={"present": ["Mira"]})
    reveal_add(game_save=save, turn_id=2, character="Mira", entry_id="ledger", told_by="Kael")
    turn_append(game_save=save, player_input="go", narrative="...", state={})
    save.refresh_from_db()
    memory_tests_run(game_save=save)
    assert [(t["turn_id"], t["tests"], t["failed"]) for t in result_turns(game_save=save)] == [(3, 3, 1), (1, 3, 1)]
    turn, at_two = results_as_of(game_save=save, turn=2)
    assert turn == 1 and {r.name: r.verdict for r in at_two} == {
        "mira-ledger": "fail",
        "ivo-crowns": "pass",
        "no-leaks": "skipped",
    }
    _, now = results_as_of(game_save=save)
    # Mira learned it at turn 2, after the test's turn 1: "at or after turn 1" fails
    assert {r.name: r.verdict for r in now} == {"mira-ledger": "fail", "ivo-crowns": "pass", "no-leaks": "pass"}


def test_a_file_with_a_bad_result_is_refused(cast, tests, no_runner):
    save = Save.objects.create(universe=cast, name="P", save_id="mtfile", memory_mode="living")
    turn_append(game_save=save, player_input="go", narrative="...", state={"present": ["Mira"]})
    save.refresh_from_db()
    memory_tests_run(game_save=save)
    document = json.loads(portable.save_export(game_save=save).read())
    items = document["sections"]["memory_test_results"]["items"]
    assert [i["name"] for i in items] == ["ivo-crowns", "mira-ledger", "no-leaks"]
    items[0]["definition"]["kind"] = "nonsense"
    items[1]["verdict"] = "maybe"
    items[2]["turn_id"] = 7
    items.append(dict(items[2], turn_id=1))
    items.append(dict(items[2], turn_id=1))
    with pytest.raises(portable.SaveFileError) as caught:
        portable.save_import(universe=cast, data=json.dumps(document).encode())
    errors = "\n".join(caught.value.errors)
    where = "sections.memory_test_results.items"
    assert f"{where}[0].definition: is not a memory test" in errors
    assert f"{where}[1].verdict: must be one of" in errors
    assert f"{where}[2].turn_id: turn 7 does not exist" in errors
    assert f"{where}[4].name: test no-leaks has two results at turn 1" in errors
