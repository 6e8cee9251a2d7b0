"""Memory tests an author writes: each kind passes and fails for the right reason, on the studio's own machinery.

The save is the `cast` universe played for three turns (Ash the player; the ledger known by
Kael alone, revealed to Mira at turn 3): who knows what comes from KnowledgeView, the context
from the narrator's prompt, beliefs with their trends, findings through the guard's interface.
"""

from __future__ import annotations

import pytest

from studio.memory.facts import Fact, insert_facts
from studio.memory.knowledge.reveals import reveal_add
from studio.memory.models import Observation
from studio.saves.errors import TurnConflict
from studio.saves.memory_tests import findings
from studio.saves.memory_tests.models import MemoryTestResult
from studio.saves.memory_tests.selectors import results_as_of
from studio.saves.memory_tests.services import memory_tests_run
from studio.saves.services import turn_append
from studio.universes.memory_tests.services import memory_test_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def played(living, no_runner, vector_memory):
    turn_append(
        game_save=living,
        player_input="I greet them.",
        narrative="Kael tells Mira about the debt.",
        state={"present": ["Mira", "Kael"], "location": "harbour"},
    )
    insert_facts(living.save_id, 1, [Fact("Kael owes Ivo forty crowns.", entities=["Kael", "Ivo"])])
    turn_append(
        game_save=living,
        player_input="",
        narrative="Ivo shows Kael the map.",
        state={"present": ["Kael", "Ivo"], "location": "chapel"},
    )
    (map_fact,) = insert_facts(living.save_id, 2, [Fact("Ivo hid the map behind the altar.", entities=["Ivo"])])
    turn_append(
        game_save=living,
        player_input="I wait with Mira.",
        narrative="Mira and Kael whisper about a book.",
        state={"present": ["Mira", "Kael"], "location": "harbour"},
    )
    reveal_add(game_save=living, turn_id=3, character="Mira", entry_id="ledger", told_by="Kael")
    Observation.objects.create(
        game_save=living,
        statement="Ivo guards the map jealously.",
        subject="Ivo",
        sources=[{"fact_id": map_fact, "turn_id": 2}],
        created_turn_id=2,
        updated_turn_id=2,
    )
    living.refresh_from_db()
    return living


def run_one(save, **record):
    record.setdefault("name", "t")
    test = memory_test_create(universe=save.universe, data=record)
    outcome = memory_tests_run(game_save=save, tests=[test], record=False).outcomes[0]
    test.delete()
    return outcome


@pytest.mark.parametrize(
    "record, verdict, says",
    [
        ({"character": "Kael", "entry": "ledger"}, "pass", "known_by names Kael"),
        ({"character": "Mira", "entry": "ledger", "turn": 3}, "pass", "told to Mira by Kael at turn 3"),
        (
            {"character": "the captain", "entry": "ledger", "turn": 2},
            "fail",
            "learned the entry “ledger” only at turn 3",
        ),
        ({"character": "Ivo", "entry": "ledger", "knows": False}, "pass", "secret (known by Kael)"),
        ({"character": "Mira", "entry": "ledger", "knows": False}, "fail", "Mira knows the entry"),
        ({"character": "Mira", "fact": "forty crowns", "turn": 1}, "pass", "knows 1 of the 1 fact"),
        ({"character": "Mira", "fact": "the map"}, "fail", "knows none of the 1 fact"),
        ({"character": "Mira", "fact": "the MAP", "knows": False}, "pass", "knows none"),
        ({"character": "Kael", "fact": "the map", "knows": False}, "fail", "knows 1 of the 1 fact"),
        ({"character": "Mira", "fact": "a dragon", "knows": False}, "pass", "No fact up to turn 3"),
        ({"character": "Mira", "fact": "a dragon"}, "fail", "No fact up to turn 3"),
        (
            {"character": "Mria", "entry": "mira", "knows": True},
            "error",
            "is no character of the Lore Book or the save",
        ),
    ],
)
def test_knows(played, record, verdict, says):
    outcome = run_one(played, kind="knows", **record)
    assert outcome.verdict == verdict, outcome.summary
    assert says in outcome.summary
    assert outcome.explain and outcome.explain[0]["record"] in ("knowledge", "fact", "note")


def test_knows_explains_each_fact_it_weighed(played):
    outcome = run_one(played, kind="knows", character="Mira", fact="the map")
    (record,) = outcome.explain
    assert record["statement"] == "Ivo hid the map behind the altar."
    assert record["known"] is False and record["why"] == "Mira was not present at turn 2 and was not told it"


@pytest.mark.parametrize(
    "record, verdict",
    [
        ({"action": "I ask Kael about the ledger.", "entry": "ledger"}, "pass"),
        ({"action": "I ask Kael about the ledger.", "entry": "ledger", "includes": False}, "fail"),
        ({"action": "I look at the gulls.", "entry": "ledger"}, "fail"),
        ({"action": "I look at the gulls.", "entry": "ledger", "includes": False}, "pass"),
    ],
)
def test_context_is_judged_on_the_narrators_prompt(played, record, verdict):
    outcome = run_one(played, kind="context", **record)
    assert outcome.verdict == verdict, outcome.summary
    prompt = outcome.explain[0]
    assert prompt["record"] == "prompt" and prompt["turn"] == 4
    if prompt["found"]:
        assert "ledger hides the smugglers" in prompt["snippet"]
    lore = next(r for r in outcome.explain if r["record"] == "lore")
    assert lore["activated"] is ("ledger" in record["action"])


def test_context_counts_an_entry_however_the_pipeline_brought_it(played, vector_memory):
    """Lore found by meaning is in the prompt as much as activated lore: the verdict reads the text."""
    vector_memory.sync_lore(
        played.save_id,
        [{"entry_id": e.entry_id, "title": e.title, "text": e.text} for e in played.universe.lore_entries.all()],
    )
    outcome = run_one(played, kind="context", action="Where are the smugglers' debts hidden?", entry="ledger")
    assert outcome.verdict == "pass", outcome.summary
    item = next(r for r in outcome.explain if r["record"] == "context_item")
    assert item["included"] and item["printed"] and "semantic" in item["reason"]
    assert next(r for r in outcome.explain if r["record"] == "lore")["activated"] is False


def test_context_with_a_missing_entry_or_an_unusable_action_is_an_error(played):
    test = memory_test_create(
        universe=played.universe, data={"name": "gone", "kind": "context", "action": "x", "entry": "tunnel"}
    )
    played.universe.lore_entries.filter(entry_id="tunnel").delete()
    outcome = memory_tests_run(game_save=played, tests=[test], record=False).outcomes[0]
    assert outcome.verdict == "error" and "no entry “tunnel”" in outcome.summary
    test.params["entry"], test.params["pov"] = "ledger", ["Nobody Known"]
    test.save()
    outcome = memory_tests_run(game_save=played, tests=[test], record=False).outcomes[0]
    assert outcome.verdict == "error" and "cannot be built" in outcome.summary


@pytest.mark.parametrize(
    "record, verdict",
    [
        ({"subject": "Ivo"}, "pass"),
        ({"subject": "ivo", "statement": "guards the map", "trend": "new"}, "pass"),
        ({"subject": "Ivo", "trend": "stale"}, "fail"),
        ({"subject": "Ivo", "statement": "sings"}, "fail"),
        ({"subject": "Ivo", "statement": "sings", "exists": False}, "pass"),
        ({"subject": "Ivo", "holder": "Mira"}, "fail"),
        ({"subject": "Mira"}, "fail"),
    ],
)
def test_belief(played, record, verdict):
    outcome = run_one(played, kind="belief", **record)
    assert outcome.verdict == verdict, outcome.summary
    if record["subject"].lower() == "ivo":
        (belief,) = outcome.explain
        assert belief["trend"] == "new" and belief["source_turns"] == [2]


def test_no_findings_reads_the_guards_interface(played):
    installed = findings.findings_source()
    findings.register_findings_source(None)
    try:
        outcome = run_one(played, kind="no_findings", turn=1)
    finally:
        findings.register_findings_source(installed)
    assert outcome.verdict == "pass" and findings.NO_SOURCE_NOTE in outcome.summary
    seen = []

    def source(game_save, *, first_turn, last_turn, kind):
        seen.append((game_save.pk, first_turn, last_turn, kind))
        rows = [
            {"kind": "leak", "turn_id": 2, "sentence": "Mira mentions the ledger.", "item": "ledger"},
            {"kind": "presence", "turn_id": 3, "sentence": "Ivo laughs."},
        ]
        return [r for r in rows if first_turn <= r["turn_id"] <= last_turn]

    findings.register_findings_source(source)
    try:
        leak = run_one(played, kind="no_findings", turn=1, until=2, finding="leak")
        assert leak.verdict == "fail" and "turn 2" in leak.summary
        assert leak.explain[0]["sentence"] == "Mira mentions the ledger."
        assert run_one(played, kind="no_findings", turn=1, finding="contradiction").verdict == "pass"
        assert run_one(played, kind="no_findings", turn=3, finding="leak").verdict == "pass"
        assert seen[-1] == (played.pk, 3, 3, "leak")
    finally:
        findings.register_findings_source(installed)


def test_no_findings_fails_on_a_finding_the_guard_let_stand(played):
    """The studio installs the continuity guard as the source: a finding accepted anyway stands in the story and
    fails the test; one the model rejected, or one still open on a draft, does not."""
    from studio.memory.continuity.models import ContinuityFinding

    def finding(turn_id, **extra):
        return ContinuityFinding.objects.create(
            game_save=played,
            turn_id=turn_id,
            kind="leak",
            sentence="Mira mentions the ledger.",
            character="Mira",
            item_layer="lore",
            item_ref={"entry_id": "ledger"},
            item_text="The ledger.",
            item_turn=0,
            why="Mira does not know the ledger.",
            **extra,
        )

    finding(2, resolution="")
    finding(2, resolution="accepted", verdict="rejected")
    assert run_one(played, kind="no_findings", turn=1, until=2, finding="leak").verdict == "pass"
    finding(2, resolution="accepted")
    outcome = run_one(played, kind="no_findings", turn=1, until=2, finding="leak")
    assert outcome.verdict == "fail" and "turn 2" in outcome.summary
    assert outcome.explain[0]["sentence"] == "Mira mentions the ledger." and outcome.explain[0]["character"] == "Mira"
    assert run_one(played, kind="no_findings", turn=1, until=2, finding="presence").verdict == "pass"


def test_a_save_outside_the_tests_turns_is_not_judged(played):
    assert run_one(played, kind="knows", character="Mira", entry="ledger", turn=4).verdict == "skipped"
    assert run_one(played, kind="knows", character="Mira", entry="ledger", turn=1, until=2).verdict == "skipped"
    # no_findings: `until` ends the range of findings, the test is judged past it
    assert run_one(played, kind="no_findings", turn=1, until=2).verdict == "pass"


def test_a_run_records_its_results_at_the_saves_turn_and_replaces_a_run_at_the_same_turn(played):
    universe = played.universe
    memory_test_create(
        universe=universe, data={"name": "kael-knows", "kind": "knows", "character": "Kael", "entry": "ledger"}
    )
    memory_test_create(
        universe=universe,
        data={"name": "ivo-ignorant", "kind": "knows", "character": "Ivo", "entry": "ledger", "knows": True},
    )
    run = memory_tests_run(game_save=played)
    assert run.recorded and not run.passed and run.counts() == {"pass": 1, "fail": 1, "error": 0, "skipped": 0}
    turn, rows = results_as_of(game_save=played)
    assert turn == 3 and [(r.name, r.verdict) for r in rows] == [("ivo-ignorant", "fail"), ("kael-knows", "pass")]
    assert rows[1].definition == {
        "name": "kael-knows",
        "kind": "knows",
        "turn": 0,
        "until": None,
        "description": "",
        "character": "Kael",
        "knows": True,
        "entry": "ledger",
        "fact": "",
    }
    memory_tests_run(game_save=played)
    assert MemoryTestResult.objects.filter(game_save=played).count() == 2


def test_a_save_that_moved_on_during_the_run_records_nothing(played, monkeypatch):
    memory_test_create(
        universe=played.universe, data={"name": "kael-knows", "kind": "knows", "character": "Kael", "entry": "ledger"}
    )
    from studio.saves.memory_tests import services

    real = services._judged

    def judge_then_play(spec, reader):
        turn_append(game_save=played, player_input="more", narrative="More.")
        return real(spec, reader)

    monkeypatch.setattr(services, "_judged", judge_then_play)
    with pytest.raises(TurnConflict, match="moved on"):
        memory_tests_run(game_save=played)
    assert not MemoryTestResult.objects.exists()
