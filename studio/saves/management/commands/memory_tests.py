"""`manage.py memory_tests <universe> [--save SAVE_ID ...]`: run a universe's memory tests, for a game's CI.

Judges every test of the universe (or those named with `--test`) on each save (`--save`, else
every save of the universe) at its current turn, records the results at that turn (not with
`--no-record`) and prints one line per test; the records behind a verdict follow each failure
(each verdict with `--verbose`). `--json` prints the runs as the API returns them.

Exit status: 0 when no judged test failed, 1 when one failed or could not be judged, 2 for a
mistake in the command (an unknown universe, save or test).
"""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandError

from studio.saves.errors import TurnConflict
from studio.saves.memory_tests.services import SaveRun, memory_tests_run_many
from studio.world.models import Universe

MARKS = {"pass": "PASS", "fail": "FAIL", "error": "ERROR", "skipped": "SKIP"}


def explain_lines(records: list[dict]) -> list[str]:
    """One line per explain record: its kind, then its fields as key=value."""
    lines = []
    for record in records:
        fields = " ".join(
            f"{key}={value!r}" if isinstance(value, str) else f"{key}={value}"
            for key, value in record.items()
            if key != "record"
        )
        lines.append(f"{record.get('record', '?')}: {fields}")
    return lines


class Command(BaseCommand):
    help = (
        "Run a universe's memory tests on its saves (or those given) at their current turns, record the "
        "results, and exit 1 when a test fails or cannot be judged (2 for an unknown universe, save or test)."
    )

    def add_arguments(self, parser):
        parser.add_argument("universe", help="The universe's slug.")
        parser.add_argument(
            "--save",
            action="append",
            default=[],
            metavar="SAVE_ID",
            help="A save of the universe to run on (repeat for several; default: every save).",
        )
        parser.add_argument(
            "--test",
            action="append",
            default=[],
            metavar="NAME",
            help="Run only this test (repeat for several; default: every test).",
        )
        parser.add_argument("--no-record", action="store_true", help="Judge without recording the results.")
        parser.add_argument("--json", action="store_true", help="Print the runs as JSON (the API's shape).")
        parser.add_argument("--verbose", action="store_true", help="Print the records behind every verdict.")

    def handle(self, *args, **options):
        universe = Universe.objects.filter(slug=options["universe"]).first()
        if universe is None:
            raise CommandError(f"No universe with the slug “{options['universe']}”.", returncode=2)
        saves = universe.saves.order_by("save_id")
        if options["save"]:
            missing = sorted(
                set(options["save"]) - set(saves.filter(save_id__in=options["save"]).values_list("save_id", flat=True))
            )
            if missing:
                raise CommandError(f"Universe “{universe.slug}” has no save {', '.join(missing)}.", returncode=2)
            saves = saves.filter(save_id__in=options["save"])
        tests = universe.memory_tests.order_by("name")
        if options["test"]:
            missing = sorted(set(options["test"]) - set(tests.values_list("name", flat=True)))
            if missing:
                raise CommandError(f"Universe “{universe.slug}” has no memory test {', '.join(missing)}.", returncode=2)
            tests = tests.filter(name__in=options["test"])
        tests = list(tests)
        if not tests:
            self.stdout.write(f"Universe “{universe.slug}” has no memory tests: nothing to run.")
            return
        try:
            runs = memory_tests_run_many(saves=list(saves), tests=tests, record=not options["no_record"])
        except TurnConflict as exc:
            raise CommandError(exc.message, returncode=2) from exc
        if options["json"]:
            self.stdout.write(
                json.dumps(
                    {
                        "universe": universe.slug,
                        "passed": all(r.passed for r in runs),
                        "saves": [r.as_dict() for r in runs],
                    },
                    indent=2,
                    ensure_ascii=False,
                )
            )
        else:
            for run in runs:
                self._print(run, verbose=options["verbose"])
        failed = [run for run in runs if not run.passed]
        if not options["json"]:
            judged = sum(1 for run in runs for o in run.outcomes if o.verdict != "skipped")
            verdict = "FAILED" if failed else "passed"
            self.stdout.write(
                f"{len(tests)} test{'s' if len(tests) != 1 else ''} on {len(runs)} save"
                f"{'s' if len(runs) != 1 else ''} ({judged} judged): {verdict}."
            )
        if failed:
            sys.exit(1)

    def _print(self, run: SaveRun, *, verbose: bool) -> None:
        counts = run.counts()
        self.stdout.write(
            f"Save {run.save_id} “{run.save_name}” at turn {run.turn}: {counts['pass']} passed, "
            f"{counts['fail']} failed, {counts['error']} not judged (errors), {counts['skipped']} "
            f"outside their turns{'' if run.recorded else ' (not recorded)'}"
        )
        for outcome in run.outcomes:
            self.stdout.write(f"  {MARKS[outcome.verdict]:<5} {outcome.name}: {outcome.summary}")
            if verbose or outcome.failed:
                for line in explain_lines(outcome.explain):
                    self.stdout.write(f"        {line}")
