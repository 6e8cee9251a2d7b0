"""The universe's Tests page: write memory tests, run them on a save or every save, see why each passed or failed.

One page, three parts, each an htmx partial of `memory/universe_tests.html` (and a whole page
without JavaScript):
- the tests, each in words (`MemoryTestSpec.sentence`), with Edit and Delete for authors;
- the form, its fields those of the chosen kind (`spec.KIND_FIELDS`); changing the kind shows
  that kind's fields (htmx, or the "Show its fields" button); every check is `parse_spec`'s and
  the universe's (`memory_tests.services`), shown beside its field, nothing written on an error;
- the results: each save's latest recorded run (as it stood: after a rewind, the run at or
  before the turn it went back to), or a save's run at an earlier turn (`?save=...&turn=...`),
  each verdict with the explain records behind it; "Run" judges the tests on one save or on
  every save at their current turns and records the results there (playtesters may run).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from studio.saves.errors import TurnConflict
from studio.saves.memory_tests.selectors import result_turns, results_as_of
from studio.saves.memory_tests.services import memory_tests_run_many
from studio.universes.access import Access, may, universe_for
from studio.universes.memory_tests.models import MemoryTest
from studio.universes.memory_tests.services import memory_test_create, memory_test_delete, memory_test_update
from studio.universes.memory_tests.spec import (
    KIND_FIELDS,
    KIND_LABELS,
    KINDS,
    TRENDS,
    SpecError,
    parse_spec,
    spec_from_form,
)

COMMON_FIELDS = [
    {
        "name": "name",
        "label": "Name",
        "type": "name",
        "help": "A slug, unique in the universe (letters, digits, - and _).",
        "required": True,
    },
    {"name": "turn", "label": "From turn", "type": "int", "help": "The test holds at or after this turn (0: always)."},
    {
        "name": "until",
        "label": "Up to turn",
        "type": "int",
        "help": "Optional: a save past this turn is not judged (no finding: the last turn of the range).",
    },
    {"name": "description", "label": "Description", "type": "text", "help": "Optional: why the test matters."},
]


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ", ".join(value)
    return str(value)


def _form(kind: str, values: dict[str, Any], errors: dict[str, list[str]], original: str = "") -> dict:
    """The form's state: the kind, its fields with their values (as typed) and errors, the test it edits."""
    fields = [dict(f, carry=True) for f in COMMON_FIELDS]  # kept when the kind changes
    for spec_field in KIND_FIELDS[kind]:
        fields.append(
            {
                "name": spec_field.name,
                "label": spec_field.label,
                "type": spec_field.type,
                "help": spec_field.help,
                "required": spec_field.required,
                "choices": spec_field.choices or (("true", "false") if spec_field.type == "bool" else ()),
                "default": _text(spec_field.default),
            }
        )
    for f in fields:
        f["value"] = _text(values.get(f["name"], f.get("default", "")))
        f["errors"] = errors.get(f["name"], [])
    known = {f["name"] for f in fields} | {"kind"}
    others = [f"{name}: {' '.join(messages)}" for name, messages in errors.items() if name not in known]
    return {
        "kind": kind,
        "kind_label": KIND_LABELS[kind],
        "fields": fields,
        "errors": errors,
        "other_errors": others,
        "original": original,
        "kinds": [(k, KIND_LABELS[k]) for k in KINDS],
        "trends": TRENDS,
    }


def _results(universe, *, save_id: str = "", turn: int | None = None) -> list[dict]:
    """Each save's results as they stand (or one save's at `turn`): the run's turn and its verdicts."""
    out = []
    for game_save in universe.saves.order_by("-last_activity_at", "-id"):
        asked = turn if game_save.save_id == save_id else None
        recorded_turn, rows = results_as_of(game_save=game_save, turn=asked)
        results = []
        for row in rows:
            try:
                sentence = parse_spec(row.definition).sentence()
            except SpecError:
                sentence = ""
            results.append(
                {
                    "name": row.name,
                    "verdict": row.verdict,
                    "summary": row.summary,
                    "sentence": sentence,
                    "explain": [
                        {
                            "record": r.get("record", ""),
                            "fields": [(k, _text(v)) for k, v in r.items() if k != "record"],
                        }
                        for r in row.explain
                    ],
                    "badge": {"pass": "ok", "fail": "bad", "error": "bad"}.get(row.verdict, "skipped"),
                }
            )
        out.append(
            {
                "save": game_save,
                "turn": recorded_turn,
                "asked": asked,
                "results": results,
                "failed": sum(1 for r in results if r["verdict"] in ("fail", "error")),
                "history": result_turns(game_save=game_save),
            }
        )
    return out


def _context(request, universe, *, form: dict | None = None, note: str = "", error: str = "") -> dict:
    tests = list(universe.memory_tests.order_by("name"))
    save_id = request.GET.get("save", "")
    turn_param = request.GET.get("turn", "")
    turn = int(turn_param) if turn_param.isdigit() else None
    return {
        "universe": universe,
        "section": "tests",
        "can_edit": may(request.user, Access.EDIT),
        "can_run": may(request.user, Access.PLAY),
        "tests": [{"test": t, "sentence": t.spec.sentence()} for t in tests],
        "form": form or _form("knows", {}, {}),
        "note": note,
        "error": error,
        "saves": _results(universe, save_id=save_id, turn=turn),
    }


@require_GET
def universe_tests(request: HttpRequest, slug: str) -> HttpResponse:
    """The page; `?kind=` (with the form's values) shows the form for that kind, `?edit=name` a test to edit."""
    universe = universe_for(user=request.user, slug=slug)
    form = None
    if request.GET.get("edit"):
        test = MemoryTest.objects.filter(universe=universe, name=request.GET["edit"]).first()
        if test is not None:
            form = _form(test.kind, test.spec.as_dict(), {}, original=test.name)
    elif request.GET.get("kind") in KINDS:
        kind = request.GET["kind"]
        values = {k: v for k, v in request.GET.items() if k not in ("kind", "original")}
        form = _form(kind, values, {}, original=request.GET.get("original", ""))
    context = _context(request, universe, form=form)
    if request.htmx and request.GET.get("part") == "form":
        return render(request, "memory/universe_tests.html#test-form", context)
    return render(request, "memory/universe_tests.html", context)


def _answer(request, universe, *, note: str = "", error: str = "", form: dict | None = None, status: int = 200):
    if request.htmx:
        return render(
            request,
            "memory/universe_tests.html#tests-panel",
            _context(request, universe, form=form, note=note, error=error),
        )
    if error or form is not None and form["errors"]:
        return render(
            request, "memory/universe_tests.html", _context(request, universe, form=form, error=error), status=status
        )
    messages.success(request, note)
    return redirect("memory:universe_tests", slug=universe.slug)


@require_POST
def universe_test_save(request: HttpRequest, slug: str) -> HttpResponse:
    """Create a test, or replace the one named `original`; a refused test shows its errors, nothing written."""
    universe = universe_for(user=request.user, slug=slug, access=Access.EDIT)
    kind = request.POST.get("kind", "")
    if kind not in KINDS:
        return _answer(request, universe, error=f"Choose a kind of test: {', '.join(KINDS)}.", status=400)
    original = request.POST.get("original", "")
    record = spec_from_form(request.POST, kind=kind)
    try:
        if original:
            test = MemoryTest.objects.filter(universe=universe, name=original).first()
            if test is None:
                return _answer(request, universe, error=f"The test “{original}” no longer exists.", status=400)
            test = memory_test_update(test=test, data=record)
            note = f"Saved the test “{test.name}”."
        else:
            test = memory_test_create(universe=universe, data=record)
            note = f"Added the test “{test.name}”."
    except SpecError as exc:
        form = _form(kind, {k: v for k, v in request.POST.items()}, exc.errors, original=original)
        return _answer(
            request, universe, form=form, error="Nothing was saved: fix the fields marked below.", status=400
        )
    return _answer(request, universe, note=note)


@require_POST
def universe_test_delete(request: HttpRequest, slug: str, test_name: str) -> HttpResponse:
    universe = universe_for(user=request.user, slug=slug, access=Access.EDIT)
    name = test_name
    test = MemoryTest.objects.filter(universe=universe, name=name).first()
    if test is None:
        return _answer(request, universe, error=f"The test “{name}” no longer exists.", status=404)
    memory_test_delete(test=test)
    return _answer(request, universe, note=f"Deleted the test “{name}” (results recorded on saves keep it as it ran).")


@require_POST
def universe_tests_run(request: HttpRequest, slug: str) -> HttpResponse:
    """Run every test on the chosen save (or every save) at its current turn and record the results."""
    universe = universe_for(user=request.user, slug=slug, access=Access.PLAY)
    target = request.POST.get("save", "all")
    saves = universe.saves.order_by("save_id")
    if target != "all":
        saves = saves.filter(save_id=target)
        if not saves.exists():
            return _answer(request, universe, error=f"This universe has no save “{target}”.", status=400)
    if not universe.memory_tests.exists():
        return _answer(request, universe, error="Write a test first: there is nothing to run.", status=400)
    try:
        runs = memory_tests_run_many(saves=list(saves))
    except TurnConflict as exc:
        return _answer(request, universe, error=exc.message, status=409)
    failed = sum(1 for run in runs for outcome in run.outcomes if outcome.failed)
    judged = sum(1 for run in runs for outcome in run.outcomes if outcome.verdict != "skipped")
    note = f"Ran {universe.memory_tests.count()} test(s) on {len(runs)} save(s): {judged} judged, " + (
        f"{failed} failed." if failed else "all passed."
    )
    return _answer(request, universe, note=note)
