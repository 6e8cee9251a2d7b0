"""Run a universe's memory tests on a save (or on every save of the universe) and record the results.

`memory_tests_run` judges each test on the save as it stands at its current turn
(`judges.judge`) and, with `record`, stores one `MemoryTestResult` per test at that turn,
replacing what an earlier run at the same turn stored. Judging reads (the prompt's vector
queries among them) outside any transaction; the write then locks the save and checks that it
still stands at the turn and timeline generation the run read, else `TurnConflict` and nothing
is written (a turn appended or a rewind during the run would file results under the wrong turn).

A judge that raises gives its test the verdict `error` with the exception's message (a vector
store that is down, say); the other tests still run. `error` counts as a failure: a CI run
must not pass on a test it could not judge.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Iterable

from django.db import transaction
from django.utils import timezone

from studio.saves.errors import TurnConflict
from studio.saves.memory_tests.judges import Judged, SaveReader, judge
from studio.saves.memory_tests.models import FAILING, MemoryTestResult, Verdict
from studio.world.models import Save

logger = logging.getLogger(__name__)

__all__ = ["Outcome", "SaveRun", "memory_tests_run", "memory_tests_run_many"]


@dataclass
class Outcome:
    """One test's verdict on one save at one turn, with the records behind it."""

    name: str
    kind: str
    sentence: str
    definition: dict[str, Any]
    verdict: str
    summary: str
    explain: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.verdict in FAILING

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "sentence": self.sentence,
            "verdict": self.verdict,
            "summary": self.summary,
            "explain": self.explain,
            "definition": self.definition,
        }


@dataclass
class SaveRun:
    """The tests of one save's run: where it stood, every outcome, whether they were recorded."""

    save_id: str
    save_name: str
    turn: int
    outcomes: list[Outcome] = field(default_factory=list)
    recorded: bool = False

    @property
    def passed(self) -> bool:
        return not any(outcome.failed for outcome in self.outcomes)

    def counts(self) -> dict[str, int]:
        return {verdict: sum(1 for o in self.outcomes if o.verdict == verdict) for verdict in Verdict.values}

    def as_dict(self) -> dict[str, Any]:
        return {
            "save_id": self.save_id,
            "name": self.save_name,
            "turn": self.turn,
            "passed": self.passed,
            "recorded": self.recorded,
            "counts": self.counts(),
            "results": [o.as_dict() for o in self.outcomes],
        }


def _judged(spec, reader: SaveReader) -> Judged:
    try:
        return judge(spec, reader)
    except Exception as exc:  # one test that cannot be judged must not hide the others' verdicts
        logger.exception("memory test %s could not be judged on save %s", spec.name, reader.save.save_id)
        return Judged(
            Verdict.ERROR,
            f"The test could not be judged: {type(exc).__name__}: {str(exc)[:300]}",
            [{"record": "note", "note": f"{type(exc).__name__}: {str(exc)[:300]}"}],
        )


def memory_tests_run(
    *, game_save: Save, tests: Iterable | None = None, record: bool = True, vector_memory=None
) -> SaveRun:
    """Judge `tests` (MemoryTest rows; default: every test of the save's universe) on `game_save` at its
    current turn; with `record`, store the results at that turn. Raise TurnConflict when the save moved
    on while the tests ran (nothing recorded)."""
    turn, generation = game_save.current_turn, game_save.timeline_generation
    rows = list(game_save.universe.memory_tests.all() if tests is None else tests)
    reader = SaveReader(game_save, turn=turn, vector_memory=vector_memory)
    run = SaveRun(save_id=game_save.save_id, save_name=game_save.name, turn=turn)
    for row in rows:
        spec = row.spec
        judged = _judged(spec, reader)
        run.outcomes.append(
            Outcome(
                name=spec.name,
                kind=spec.kind,
                sentence=spec.sentence(),
                definition=spec.as_dict(),
                verdict=str(judged.verdict),
                summary=judged.summary,
                explain=judged.explain,
            )
        )
    if record and run.outcomes:
        _record(game_save, turn=turn, generation=generation, outcomes=run.outcomes)
        run.recorded = True
    return run


def _record(game_save: Save, *, turn: int, generation: int, outcomes: list[Outcome]) -> None:
    with transaction.atomic():
        locked = Save.objects.select_for_update().get(pk=game_save.pk)
        if locked.current_turn != turn or locked.timeline_generation != generation:
            raise TurnConflict(
                f"Save {locked.save_id} moved on while its memory tests ran (turn {turn} then, {locked.current_turn} "
                "now): nothing was recorded; run them again.",
                save_id=locked.save_id,
                current_turn=locked.current_turn,
            )
        MemoryTestResult.objects.filter(game_save=locked, turn_id=turn, name__in=[o.name for o in outcomes]).delete()
        now = timezone.now()
        MemoryTestResult.objects.bulk_create(
            [
                MemoryTestResult(
                    game_save=locked,
                    turn_id=turn,
                    name=o.name,
                    kind=o.kind,
                    definition=o.definition,
                    verdict=o.verdict,
                    summary=o.summary,
                    explain=o.explain,
                    ran_at=now,
                )
                for o in outcomes
            ]
        )


def memory_tests_run_many(
    *, saves: Iterable[Save], tests: Iterable | None = None, record: bool = True, vector_memory=None
) -> list[SaveRun]:
    """Run the tests on each save in turn (`memory_tests_run`); a save that moved on during its run is
    judged again once, then its conflict is raised."""
    tests = None if tests is None else list(tests)
    runs = []
    for game_save in saves:
        try:
            runs.append(memory_tests_run(game_save=game_save, tests=tests, record=record, vector_memory=vector_memory))
        except TurnConflict:
            game_save.refresh_from_db()
            runs.append(memory_tests_run(game_save=game_save, tests=tests, record=record, vector_memory=vector_memory))
    return runs
