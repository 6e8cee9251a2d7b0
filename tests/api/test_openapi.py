"""The OpenAPI document: valid 3.1, in step with the URL patterns, and true to real responses."""

from __future__ import annotations

import re

import pytest
from django.urls import URLPattern, URLResolver
from jsonschema import ValidationError
from openapi_spec_validator import validate

from studio.api import urls as api_urls
from studio.api.openapi import build_openapi

from tests.support.openapi import schema_validator

from tests.support.api_errors import error_code

pytestmark = pytest.mark.django_db

NOT_DESCRIBED = {"unknown"}  # the JSON 404 catch-all


def routes():
    """Yield (openapi path, methods) for every named API URL pattern."""
    for entry in api_urls.urlpatterns:
        assert isinstance(entry, URLPattern) and not isinstance(entry, URLResolver)
        if entry.name in NOT_DESCRIBED:
            continue
        route = str(entry.pattern)
        openapi_path = "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)
        yield openapi_path, set(entry.callback.api_methods)


def test_the_document_is_valid_openapi_3_1():
    document = build_openapi()
    assert document["openapi"] == "3.1.0"
    validate(document)


def test_every_route_is_described_and_nothing_else():
    paths = build_openapi()["paths"]
    described = {
        path: {m.upper() for m in item if m in {"get", "post", "put", "patch", "delete"}}
        for path, item in paths.items()
    }
    actual = dict(routes())
    assert set(actual) == set(described)
    for path, methods in actual.items():
        assert methods == described[path], path


def test_path_parameters_match_the_route():
    for path, item in build_openapi()["paths"].items():
        names = set(re.findall(r"{(\w+)}", path))
        declared = {p["name"] for p in item.get("parameters", []) if p["in"] == "path"}
        assert names == declared, path


def test_every_operation_has_an_id_and_documents_401():
    ids = []
    for item in build_openapi()["paths"].values():
        for method, op in item.items():
            if method == "parameters":
                continue
            ids.append(op["operationId"])
            assert "401" in op["responses"]
    assert len(ids) == len(set(ids))


def test_the_document_is_served(api):
    response = api.get("/api/v1/openapi.json")
    assert response.status_code == 200
    body = response.json()
    assert body["servers"][0]["url"].endswith("/api/v1")
    validate(body)


def test_real_responses_match_their_schemas(api, game_save):
    base = f"/api/v1/saves/{game_save.save_id}"
    schema_validator("Save").validate(api.get(base).json())
    page = api.get(f"{base}/turns").json()
    for turn in page["items"]:
        schema_validator("Turn").validate(turn)
    schema_validator("Me").validate(api.get("/api/v1/me").json())
    schema_validator("RewindPreview").validate(api.get(f"{base}/rewind-preview", {"turn_id": 1}).json())
    schema_validator("RewindResult").validate(api.post(f"{base}/rewind", {"turn_id": 2}).json())
    error = api.get(f"{base}/facts", {"limit": "x"})
    assert error_code(error) == "validation_error"
    schema_validator("Error").validate(error.json())


def test_a_wrong_response_would_fail_schema_validation():
    # Guard against a schema so loose it accepts anything.
    with pytest.raises(ValidationError):
        schema_validator("Save").validate({"save_id": 1})


def test_memory_and_job_responses_match_their_schemas(api, game_save):
    from studio.memory import facts as F
    from studio.memory import mental_models as MM
    from studio.memory import observations as O
    from studio.memory.models import Job, JobKind

    ids = F.insert_facts(game_save.save_id, 2, [F.Fact(statement="Kael sold the compass.", entities=["Kael"])])
    O.insert_observation(
        game_save.save_id,
        O.Observation(
            statement="Kael sells what he finds.",
            subject="Kael",
            sources=[{"fact_id": ids[0], "turn_id": 2}],
            created_turn_id=2,
            updated_turn_id=2,
        ),
    )
    MM.upsert_mental_model(game_save.save_id, "Kael", "Kael, a trader.", 2, [])
    Job.objects.create(kind=JobKind.EMBED_TURN, game_save=game_save, turn_id=2)
    base = f"/api/v1/saves/{game_save.save_id}"
    for path, name in (("facts", "Fact"), ("beliefs", "Belief"), ("mental-models", "MentalModel"), ("jobs", "Job")):
        items = api.get(f"{base}/{path}").json()["items"]
        assert items, path
        for item in items:
            schema_validator(name).validate(item)
    schema_validator("Universe").validate(api.get("/api/v1/universes").json()["items"][0])
    appended = api.post(f"{base}/turns", {"narrative": "Next.", "state": {"hp": 3}})
    schema_validator("TurnAppended").validate(appended.json())
    forked = api.post(f"{base}/fork", {"turn_id": 1})
    schema_validator("Save").validate(forked.json())


def test_error_answers_declare_their_headers():
    document = build_openapi()
    context = document["paths"]["/saves/{save_id}/context"]["post"]["responses"]
    assert "WWW-Authenticate" in context["401"]["headers"] and "Retry-After" in context["503"]["headers"]
    narrate = document["paths"]["/saves/{save_id}/narrate"]["post"]["responses"]
    assert "Retry-After" in narrate["429"]["headers"]
