"""GET /saves/{id}/export and POST /universes/{slug}/saves/import."""

from __future__ import annotations

import gzip
import json

import pytest
from jsonschema import Draft202012Validator

from studio.api.openapi import build_openapi
from studio.saves import portable
from studio.world.models import Save, Universe
from tests.saves.portable_support import rich_save, table_counts

from tests.support.api_errors import error_code

pytestmark = pytest.mark.django_db

IMPORT = "/api/v1/universes/test-world/saves/import"


def schema(name: str) -> Draft202012Validator:
    return Draft202012Validator({**build_openapi(), "$ref": f"#/components/schemas/{name}"})


def download(response) -> bytes:
    return b"".join(response.streaming_content)


def test_export_answers_the_file(api, universe):
    save = rich_save(universe)
    response = api.get(f"/api/v1/saves/{save.save_id}/export")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == 'attachment; filename="rich-run-turn-4.axiom-save.json"'
    data = download(response)
    assert data == portable.save_export(game_save=save).read()
    schema("SaveFile").validate(json.loads(data))  # the OpenAPI description is true to the file
    packed = api.get(f"/api/v1/saves/{save.save_id}/export", {"compress": "gzip"})
    assert packed["Content-Type"] == "application/gzip" and gzip.decompress(download(packed)) == data
    assert error_code(api.get(f"/api/v1/saves/{save.save_id}/export", {"compress": "zip"})) == "validation_error"


def test_export_needs_membership_and_the_role(make_api, outsider, member_without_role, game_save):
    assert make_api(outsider).get(f"/api/v1/saves/{game_save.save_id}/export").status_code == 404
    response = make_api(member_without_role).get(f"/api/v1/saves/{game_save.save_id}/export")
    assert response.status_code == 403 and error_code(response) == "permission_denied"
    assert make_api(None).get(f"/api/v1/saves/{game_save.save_id}/export").status_code == 401


def test_import_creates_a_new_save(api, universe):
    save = rich_save(universe)
    data = portable.save_export(game_save=save).read()
    response = api.post(IMPORT, raw=data)
    assert response.status_code == 201, response.content
    body = response.json()
    schema("SaveImported").validate(body)
    imported = Save.objects.get(save_id=body["save"]["save_id"])
    assert imported.pk != save.pk and body["save"]["current_turn"] == 4 and body["save"]["universe"] == "test-world"
    assert body["counts"]["facts"] == 5 and body["jobs_queued"] == 5 and body["warnings"] == []
    assert portable.save_export(game_save=imported).read() == data


def test_import_takes_gzip_and_a_name(api, universe):
    data = portable.save_export(game_save=rich_save(universe), compress=True).read()
    response = api.post(IMPORT + "?name=From%20the%20engine", raw=data, content_type="application/gzip")
    assert response.status_code == 201 and response.json()["save"]["name"] == "From the engine"


def test_a_malformed_file_is_400_with_every_problem_and_nothing_written(api, universe):
    document = json.loads(portable.save_export(game_save=rich_save(universe)).read())
    document["sections"]["facts"]["items"][1]["id"] = 1
    document["sections"]["beliefs"]["items"][0]["sources"][0]["fact_id"] = 404
    before = table_counts()
    response = api.post(IMPORT, raw=json.dumps(document))
    assert response.status_code == 400 and error_code(response) == "invalid_save_file"
    problems = response.json()["error"]["details"]["problems"]
    assert {"location": "sections.facts.items[1].id", "message": "id 1 is used twice in facts"} in problems
    assert {
        "location": "sections.beliefs.items[0].sources[0].fact_id",
        "message": "points at fact 404, which is not in the file's facts",
    } in problems
    assert "nothing was imported" in response.json()["error"]["message"]
    response = api.post(IMPORT, raw=b"{not json")
    assert (
        error_code(response) == "invalid_save_file"
        and response.json()["error"]["details"]["problems"][0]["location"] == "line 1 column 2"
    )
    assert table_counts() == before


def test_import_limits_and_media_types(api, universe, settings):
    settings.AXIOM_SAVE_FILE_MAX_BYTES = 2000
    before = table_counts()
    response = api.post(IMPORT, raw=b" " * 2001)
    assert response.status_code == 413 and error_code(response) == "body_too_large"
    response = api.post(IMPORT, raw=gzip.compress(b" " * 50_000), content_type="application/gzip")
    assert response.status_code == 413 and "decompresses to more than 2000 bytes" in response.json()["error"]["message"]
    response = api.post(IMPORT, raw=b"{}", content_type="text/plain")
    assert response.status_code == 415
    assert table_counts() == before


def test_import_needs_a_universe_one_belongs_to_and_the_role(make_api, outsider, member_without_role, universe, author):
    data = portable.save_export(game_save=rich_save(universe)).read()
    stranger, reader = make_api(outsider), make_api(member_without_role)
    Universe.objects.create(name="Other", slug="other", owner=author)
    before = table_counts()
    assert stranger.post(IMPORT, raw=data).status_code == 404
    assert reader.post("/api/v1/universes/other/saves/import", raw=data).status_code == 404
    response = reader.post(IMPORT, raw=data)
    assert response.status_code == 403 and error_code(response) == "permission_denied"
    assert table_counts() == before


def test_a_session_import_needs_csrf(client, playtester, universe):
    from django.test import Client

    data = portable.save_export(game_save=rich_save(universe)).read()
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(playtester)
    response = browser.post(IMPORT, data, content_type="application/json")
    assert response.status_code == 403 and error_code(response) == "csrf_failed"
