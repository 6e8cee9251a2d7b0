"""Memory tests in the JSON API: a universe's tests (list, create, read, replace, delete) and their runs.

The body of a test is its flat record (docs/authoring.md "Memory tests"), checked by the same
`parse_spec` as the Tests page and Universe-as-Code: a refused test is a 400 `validation_error`
naming each field, and nothing is written. A run judges the tests on saves at their current
turns and records the results there; for a game's CI its answer is 200 when no judged test
failed and 422 (`tests_failed`, same body) when one failed or could not be judged, so
`curl --fail` fails the build. The request and response schemas live here (memory tests only). The run routes are
registered before a test's own, so `.../memory-tests/run` is never read as a test's name (no
test may be called `run`).
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from django.http import HttpRequest, HttpResponse, JsonResponse
from ninja import Query, Schema
from pydantic import ConfigDict, Field

from studio.api import schemas as S
from studio.api.errors import conflict, not_found, validation_error
from studio.api.ninja_api import router
from studio.saves.access import Access, save_for, universe_for
from studio.saves.errors import TurnConflict
from studio.saves.memory_tests.selectors import results_as_of
from studio.saves.memory_tests.services import memory_tests_run_many
from studio.universes.memory_tests.models import MemoryTest
from studio.universes.memory_tests.services import memory_test_create, memory_test_delete, memory_test_update
from studio.universes.memory_tests.spec import SpecError, parse_spec

READ_ERRORS = {400: S.Error, 401: S.Error, 404: S.Error, 503: S.Error}
WRITE_ERRORS = {**READ_ERRORS, 403: S.Error, 409: S.Error, 413: S.Error, 415: S.Error}
UNIVERSE = "/universes/{str:slug}/memory-tests"
SAVE = "/saves/{str:save_id}/memory-tests"
TAGS = ["Memory tests"]


class MemoryTestIn(Schema):
    """A memory test's flat record: the common fields and those of its kind (docs/authoring.md)."""

    model_config = ConfigDict(extra="forbid")
    name: S.Text = Field(..., max_length=80, description="A slug, unique in the universe.")
    kind: Literal["knows", "context", "belief", "no_findings"]
    turn: Optional[S.Int] = Field(None, description="N: the test holds at or after turn N (default 0).")
    until: Optional[S.Int] = Field(None, description="M: and up to turn M (no_findings: the range's end).")
    description: Optional[S.Text] = None
    character: Optional[S.Text] = Field(None, description="knows: the character.")
    knows: Optional[S.Bool] = Field(None, description="knows: true (default) or false.")
    entry: Optional[S.Text] = Field(None, description="knows / context: a Lore Book entry_id.")
    fact: Optional[S.Text] = Field(None, description="knows: a phrase a fact's statement holds.")
    action: Optional[S.Text] = Field(None, description="context: the player's action.")
    includes: Optional[S.Bool] = Field(None, description="context: true (default) or false.")
    pov: Optional[list[S.Text]] = Field(None, description="context: the point of view (empty: those on scene).")
    subject: Optional[S.Text] = Field(None, description="belief: who or what it is about.")
    statement: Optional[S.Text] = Field(None, description="belief: a phrase its statement holds.")
    trend: Optional[Literal["any", "new", "strengthening", "stable", "weakening", "stale"]] = None
    holder: Optional[S.Text] = Field(None, description="belief: who holds it.")
    exists: Optional[S.Bool] = Field(None, description="belief: true (default) or false.")
    finding: Optional[Literal["any", "leak", "contradiction", "presence"]] = None


class MemoryTestOut(Schema):
    model_config = ConfigDict(extra="allow")
    name: str
    kind: str
    turn: int
    until: Optional[int] = None
    description: str = ""
    sentence: str


class MemoryTestList(Schema):
    items: list[MemoryTestOut]


class RunIn(Schema):
    model_config = ConfigDict(extra="forbid")
    save_ids: Optional[list[S.Text]] = Field(None, description="The saves to run on (default: every save).")
    tests: Optional[list[S.Text]] = Field(None, description="The tests to run, by name (default: every test).")
    record: S.Bool = Field(True, description="Record the results at each save's turn.")


class SaveRunIn(Schema):
    model_config = ConfigDict(extra="forbid")
    tests: Optional[list[S.Text]] = None
    record: S.Bool = True


class ResultOut(Schema):
    name: str
    kind: str
    sentence: str = ""
    verdict: Literal["pass", "fail", "error", "skipped"]
    summary: str
    explain: list[dict[str, Any]]
    definition: dict[str, Any]


class SaveRunOut(Schema):
    save_id: str
    name: str
    turn: int
    passed: bool
    recorded: bool
    counts: dict[str, int]
    results: list[ResultOut]


class RunOut(Schema):
    status: Literal["passed", "failed"]
    passed: bool
    saves: list[SaveRunOut]


class ResultsQuery(Schema):
    turn: Optional[int] = Field(None, ge=0, description="Results as they stood at this turn (default: the current).")


class RecordedResults(Schema):
    save_id: str
    current_turn: int
    recorded_turn: Optional[int]
    results: list[ResultOut]


def test_json(test: MemoryTest) -> dict[str, Any]:
    spec = test.spec
    return {**spec.as_dict(), "sentence": spec.sentence()}


def _test_for(universe, name: str) -> MemoryTest:
    test = MemoryTest.objects.filter(universe=universe, name=name).first()
    if test is None:
        raise not_found(f"memory test “{name}”")
    return test


def _sentence(definition: dict) -> str:
    try:
        return parse_spec(definition).sentence()
    except SpecError:
        return ""


def _record(payload: MemoryTestIn) -> dict[str, Any]:
    return payload.model_dump(exclude_none=True)


def _refused(exc: SpecError):
    return validation_error(exc.errors, "The memory test is not valid: nothing was written.")


@router.get(
    UNIVERSE,
    response={200: MemoryTestList, **READ_ERRORS},
    url_name="memory_test_list",
    tags=TAGS,
    operation_id="listMemoryTests",
    summary="The universe's memory tests, by name.",
)
def memory_test_list(request: HttpRequest, slug: str):
    universe = universe_for(user=request.user, slug=slug)
    return JsonResponse({"items": [test_json(t) for t in universe.memory_tests.order_by("name")]})


@router.post(
    UNIVERSE,
    response={201: MemoryTestOut, **WRITE_ERRORS},
    tags=TAGS,
    operation_id="createMemoryTest",
    summary="Add a memory test (400 naming each wrong field; nothing is written).",
)
def memory_test_add(request: HttpRequest, slug: str, payload: MemoryTestIn):
    universe = universe_for(user=request.user, slug=slug, access=Access.EDIT)
    try:
        test = memory_test_create(universe=universe, data=_record(payload))
    except SpecError as exc:
        raise _refused(exc) from exc
    return JsonResponse(test_json(test), status=201)


def _tests(universe, names: list[str] | None):
    tests = universe.memory_tests.order_by("name")
    if names:
        missing = sorted(set(names) - set(tests.filter(name__in=names).values_list("name", flat=True)))
        if missing:
            raise validation_error({"tests": [f"no memory test {', '.join(missing)} in this universe."]})
        tests = tests.filter(name__in=names)
    return list(tests)


def _run_answer(runs) -> JsonResponse:
    passed = all(run.passed for run in runs)
    body = {"status": "passed" if passed else "failed", "passed": passed, "saves": [run.as_dict() for run in runs]}
    return JsonResponse(body, status=200 if passed else 422)


def _run(saves, tests, record: bool):
    try:
        return _run_answer(memory_tests_run_many(saves=saves, tests=tests, record=record))
    except TurnConflict as exc:
        raise conflict(exc.message, {"save_id": exc.save_id, "current_turn": exc.current_turn}) from exc


@router.post(
    UNIVERSE + "/run",
    response={200: RunOut, 422: RunOut, **WRITE_ERRORS},
    url_name="memory_tests_run",
    tags=TAGS,
    operation_id="runMemoryTests",
    summary="Run the tests on the universe's saves (or those given) at their current turns; 422 when one "
    "failed or could not be judged.",
)
def memory_tests_run_view(request: HttpRequest, slug: str, payload: RunIn | None = None):
    payload = payload or RunIn()
    universe = universe_for(user=request.user, slug=slug, access=Access.PLAY)
    saves = universe.saves.order_by("save_id")
    if payload.save_ids:
        missing = sorted(
            set(payload.save_ids) - set(saves.filter(save_id__in=payload.save_ids).values_list("save_id", flat=True))
        )
        if missing:
            raise validation_error({"save_ids": [f"no save {', '.join(missing)} in this universe."]})
        saves = saves.filter(save_id__in=payload.save_ids)
    return _run(list(saves), _tests(universe, payload.tests), payload.record)


@router.post(
    SAVE + "/run",
    response={200: RunOut, 422: RunOut, **WRITE_ERRORS},
    url_name="save_memory_tests_run",
    tags=TAGS,
    operation_id="runSaveMemoryTests",
    summary="Run the universe's tests on this save at its current turn; 422 when one failed.",
)
def save_memory_tests_run(request: HttpRequest, save_id: str, payload: SaveRunIn | None = None):
    payload = payload or SaveRunIn()
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    return _run([game_save], _tests(game_save.universe, payload.tests), payload.record)


@router.get(
    UNIVERSE + "/{str:name}",
    response={200: MemoryTestOut, **READ_ERRORS},
    url_name="memory_test_detail",
    tags=TAGS,
    operation_id="getMemoryTest",
    summary="One memory test.",
)
def memory_test_detail(request: HttpRequest, slug: str, name: str):
    universe = universe_for(user=request.user, slug=slug)
    return JsonResponse(test_json(_test_for(universe, name)))


@router.put(
    UNIVERSE + "/{str:name}",
    response={200: MemoryTestOut, **WRITE_ERRORS},
    tags=TAGS,
    operation_id="replaceMemoryTest",
    summary="Replace a memory test (its name may change).",
)
def memory_test_replace(request: HttpRequest, slug: str, name: str, payload: MemoryTestIn):
    universe = universe_for(user=request.user, slug=slug, access=Access.EDIT)
    try:
        test = memory_test_update(test=_test_for(universe, name), data=_record(payload))
    except SpecError as exc:
        raise _refused(exc) from exc
    return JsonResponse(test_json(test))


@router.delete(
    UNIVERSE + "/{str:name}",
    response={204: None, **WRITE_ERRORS},
    tags=TAGS,
    operation_id="deleteMemoryTest",
    summary="Delete a memory test (recorded results keep it as it ran).",
)
def memory_test_remove(request: HttpRequest, slug: str, name: str):
    universe = universe_for(user=request.user, slug=slug, access=Access.EDIT)
    memory_test_delete(test=_test_for(universe, name))
    return HttpResponse(status=204)


@router.get(
    SAVE + "/results",
    response={200: RecordedResults, **READ_ERRORS},
    url_name="save_memory_test_results",
    tags=TAGS,
    operation_id="getMemoryTestResults",
    summary="The results recorded by the latest run at or before a turn: as they stood then.",
)
def save_memory_test_results(request: HttpRequest, save_id: str, params: Query[ResultsQuery]):
    game_save = save_for(user=request.user, save_id=save_id)
    turn, rows = results_as_of(game_save=game_save, turn=params.turn)
    return JsonResponse(
        {
            "save_id": game_save.save_id,
            "current_turn": game_save.current_turn,
            "recorded_turn": turn,
            "results": [
                {
                    "name": r.name,
                    "kind": r.kind,
                    "sentence": _sentence(r.definition),
                    "verdict": r.verdict,
                    "summary": r.summary,
                    "explain": r.explain,
                    "definition": r.definition,
                }
                for r in rows
            ],
        }
    )
