"""Memory tests in the API: written with the same checks as the page and the file, run for a game's CI
(200 when every judged test passed, 422 when one failed), the results as they stood at a turn."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from studio.api.openapi import build_openapi
from studio.saves.checkpoints import CheckpointManager
from studio.saves.services import turn_append
from studio.universes.models import MemoryTest

pytestmark = pytest.mark.django_db

BASE = "/api/v1/universes/harbour/memory-tests"
KAEL_KNOWS = {"name": "kael-knows", "kind": "knows", "character": "Kael", "entry": "ledger"}
IVO_KNOWS = {"name": "ivo-knows", "kind": "knows", "character": "Ivo", "entry": "ledger", "turn": 1}


def schema(name: str) -> Draft202012Validator:
    return Draft202012Validator({**build_openapi(), "$ref": f"#/components/schemas/{name}"})


def put(client, path, body):
    return client.client.put(path, json.dumps(body), content_type="application/json", headers=client._headers())


def delete(client, path):
    return client.client.delete(path, headers=client._headers())


@pytest.fixture
def author_api(make_api, author, cast):
    return make_api(author)


@pytest.fixture
def played(living, no_runner):
    turn_append(
        game_save=living,
        player_input="Hello.",
        narrative="Mira and Kael talk.",
        state={"present": ["Mira", "Kael"], "location": "harbour"},
    )
    turn_append(
        game_save=living,
        player_input="Onwards.",
        narrative="Ivo joins.",
        state={"present": ["Mira", "Kael", "Ivo"], "location": "harbour"},
    )
    living.refresh_from_db()
    return living


def test_write_read_replace_delete(author_api):
    created = author_api.post(BASE, KAEL_KNOWS)
    assert created.status_code == 201, created.content
    body = created.json()
    schema("MemoryTestOut").validate(body)
    assert body["sentence"] == "At or after turn 0, Kael knows the entry “ledger”."
    assert body["knows"] is True and body["until"] is None and body["fact"] == ""
    assert [t["name"] for t in author_api.get(BASE).json()["items"]] == ["kael-knows"]
    replaced = put(author_api, f"{BASE}/kael-knows", {**KAEL_KNOWS, "name": "kael-knows-it", "turn": 2})
    assert replaced.status_code == 200 and replaced.json()["turn"] == 2
    assert author_api.get(f"{BASE}/kael-knows").status_code == 404
    assert author_api.get(f"{BASE}/kael-knows-it").json()["name"] == "kael-knows-it"
    assert delete(author_api, f"{BASE}/kael-knows-it").status_code == 204
    assert not MemoryTest.objects.exists()


@pytest.mark.parametrize(
    "body, field",
    [
        ({"name": "x", "kind": "knows", "character": "Mira"}, "entry"),  # neither an entry nor a fact
        ({"name": "x", "kind": "knows", "character": "Mira", "entry": "nope"}, "entry"),  # not in the book
        ({"name": "x", "kind": "knows", "character": "Mira", "entry": "ledger", "action": "hi"}, "action"),
        ({"name": "x", "kind": "context", "entry": "ledger"}, "action"),
        ({"name": "x", "kind": "belief", "subject": "Ivo", "trend": "rising"}, "trend"),
        ({"name": "x", "kind": "knows", "character": "Mira", "entry": "ledger", "knows": "yes"}, "knows"),
        ({"name": "x", "kind": "knows", "character": "Mira", "entry": "ledger", "turn": 5, "until": 2}, "until"),
        ({"name": "run", "kind": "knows", "character": "Mira", "entry": "ledger"}, "name"),
        ({"name": "bad name", "kind": "knows", "character": "Mira", "entry": "ledger"}, "name"),
        ({"name": "x", "kind": "knows", "character": "Mi\x00ra", "entry": "ledger"}, "character"),
    ],
)
def test_a_refused_test_names_its_field_and_writes_nothing(author_api, body, field):
    answer = author_api.post(BASE, body)
    assert answer.status_code == 400, answer.content
    assert field in answer.json()["error"]["details"]
    assert not MemoryTest.objects.exists()


def test_a_playtester_reads_and_runs_but_does_not_write(make_api, playtester, author_api, played):
    author_api.post(BASE, KAEL_KNOWS)
    api = make_api(playtester)
    assert api.get(BASE).status_code == 200
    assert api.post(BASE, {**KAEL_KNOWS, "name": "other"}).status_code == 403
    assert api.post(f"{BASE}/run", {}).status_code == 200


def test_a_run_answers_422_when_a_test_fails_and_the_results_stand_as_they_were(author_api, played):
    author_api.post(BASE, KAEL_KNOWS)
    passing = author_api.post(f"{BASE}/run")
    assert passing.status_code == 200 and passing.json()["status"] == "passed"
    schema("RunOut").validate(passing.json())
    author_api.post(BASE, IVO_KNOWS)  # Ivo does not know the ledger: known by Kael alone
    failing = author_api.post(f"{BASE}/run", {"save_ids": [played.save_id]})
    assert failing.status_code == 422, failing.content
    body = failing.json()
    schema("RunOut").validate(body)
    (run,) = body["saves"]
    assert body["status"] == "failed" and run["turn"] == 2 and run["counts"]["fail"] == 1
    ivo = next(r for r in run["results"] if r["name"] == "ivo-knows")
    assert ivo["verdict"] == "fail" and ivo["explain"][0]["why"] == "secret (known by Kael)"

    # The save's own run; then a rewind to 1: the results recorded at 2 went with the turn.
    assert (
        author_api.post(f"/api/v1/saves/{played.save_id}/memory-tests/run", {"tests": ["kael-knows"]}).status_code
        == 200
    )
    recorded = author_api.get(f"/api/v1/saves/{played.save_id}/memory-tests/results").json()
    schema("RecordedResults").validate(recorded)
    assert recorded["recorded_turn"] == 2 and {r["name"] for r in recorded["results"]} == {"kael-knows", "ivo-knows"}
    CheckpointManager().rewind(played, 1)
    after = author_api.get(f"/api/v1/saves/{played.save_id}/memory-tests/results").json()
    assert after["recorded_turn"] is None and after["results"] == []


def test_a_run_names_unknown_saves_and_tests(author_api, played):
    author_api.post(BASE, KAEL_KNOWS)
    assert "save_ids" in author_api.post(f"{BASE}/run", {"save_ids": ["nope"]}).json()["error"]["details"]
    assert "tests" in author_api.post(f"{BASE}/run", {"tests": ["nope"]}).json()["error"]["details"]
