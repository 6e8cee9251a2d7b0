"""Who may call which API endpoint: every route and method is in the table below.

The test walks `studio.api.urls`, so a new endpoint fails here until its access rule is
written down (and then checked): anonymous 401 (also covered by tests/test_login_required),
a user outside the universe 404, a member without the playtester role 403 on writes and
allowed on reads, staff allowed on reads without membership, a playtester allowed on both.
"""

from __future__ import annotations

import pytest
from django.urls import URLPattern

from studio.api import urls as api_urls
from studio.memory.models import Job, JobKind, JobStatus

pytestmark = pytest.mark.django_db

# (url name, method) -> (kind, query params or JSON body, status for an allowed user)
# kind: "open" = any authenticated user; "read" = universe members; "write" = members with
# the playtester role; "create" = playtester role and membership of the named universe; "edit" = the
# universe's authors (a playtester is refused, the author allowed).
RULES = {
    ("openapi", "GET"): ("open", None, 200),
    ("docs", "GET"): ("open", None, 200),
    ("me", "GET"): ("open", None, 200),
    ("universe_list", "GET"): ("open", None, 200),
    ("save_collection", "GET"): ("open", None, 200),
    ("save_collection", "POST"): ("create", {"universe": "test-world", "name": "New"}, 201),
    ("save_detail", "GET"): ("read", None, 200),
    ("turn_collection", "GET"): ("read", None, 200),
    ("turn_collection", "POST"): ("write", {"narrative": "Next."}, 201),
    ("turn_detail", "GET"): ("read", None, 200),
    ("turn_detail", "PATCH"): ("write", {"narrative": "Edited."}, 200),
    ("fact_list", "GET"): ("read", None, 200),
    ("belief_list", "GET"): ("read", None, 200),
    ("mental_model_list", "GET"): ("read", None, 200),
    ("memory_query", "GET"): ("read", {"query_text": "harbour"}, 200),
    ("memory_query", "POST"): ("read", {"query_text": "harbour"}, 200),
    ("memory_context", "GET"): ("read", {"query_text": "harbour"}, 200),
    ("memory_context", "POST"): ("read", {"query_text": "harbour"}, 200),
    ("narrate", "POST"): ("write", {"player_input": "look"}, 503),  # no LLM configured in tests
    ("opening", "GET"): ("read", None, 200),
    ("opening", "POST"): ("write", {"number": 1}, 409),  # the test world has no card and turns already
    ("continue", "POST"): ("write", {}, 503),
    ("impersonate", "POST"): ("write", {}, 503),
    ("undo", "POST"): ("write", {"expected_current_turn": 3}, 200),
    ("retry", "POST"): ("write", {"expected_current_turn": 3}, 503),
    ("draft", "GET"): ("read", None, 200),
    ("play_settings", "GET"): ("read", None, 200),
    ("play_settings", "PATCH"): ("write", {"authors_note": "Rain."}, 200),
    ("rewind_preview", "GET"): ("read", {"turn_id": 1}, 200),
    ("rewind", "POST"): ("write", {"turn_id": 1}, 200),
    ("fork", "POST"): ("write", {"turn_id": 1}, 201),
    ("job_list", "GET"): ("read", None, 200),
    ("job_detail", "GET"): ("read", None, 200),
    ("job_retry", "POST"): ("write", None, 200),
    ("jobs_retry_skipped", "POST"): ("write", None, 200),
    ("chapter_list", "GET"): ("read", None, 200),
    ("chapter_close", "POST"): ("write", None, 201),
    ("chapter_detail", "GET"): ("read", None, 200),
    ("chapter_detail", "PATCH"): ("write", {"summary": "You wait."}, 200),
    ("chapter_summarize", "POST"): ("write", None, 409),  # no LLM configured in tests
    ("save_export", "GET"): ("write", None, 200),  # reads, but needs the playtester role like an import
    ("save_import", "POST"): (
        "create",
        {
            "format": "axiom-save",
            "format_version": 1,
            "universe": {"slug": "test-world", "name": "Test World", "lore_hash": "sha256:0"},
            "save": {
                "name": "Imported",
                "memory_mode": "classic",
                "beliefs_enabled": True,
                "meta": {},
                "current_turn": 0,
                "timeline_generation": 0,
                "last_activity_at": "2025-01-01T00:00:00Z",
            },
            "sections": {
                name: {"version": 1, "optional": False, "items": []}
                for name in ("turns", "facts", "beliefs", "mental_models", "jobs", "llm_calls", "recorded_queries")
            },
        },
        201,
    ),
    # Memory tests: authors write them ("edit"), members read them, playtesters run them.
    ("memory_test_list", "GET"): ("read", None, 200),
    ("memory_test_list", "POST"): (
        "edit",
        {"name": "new-test", "kind": "knows", "character": "Kaël", "entry": "kael"},
        201,
    ),
    ("memory_test_detail", "GET"): ("read", None, 200),
    ("memory_test_detail", "PUT"): (
        "edit",
        {"name": "kael-known", "kind": "knows", "character": "Kaël", "entry": "port-vey"},
        200,
    ),
    ("memory_test_detail", "DELETE"): ("edit", None, 204),
    ("memory_tests_run", "POST"): ("write", {}, 200),
    ("save_memory_tests_run", "POST"): ("write", {}, 200),
    ("save_memory_test_results", "GET"): ("read", None, 200),
}
NOT_ENDPOINTS = {"unknown"}


def endpoints():
    for pattern in api_urls.urlpatterns:
        assert isinstance(pattern, URLPattern)
        if pattern.name in NOT_ENDPOINTS:
            continue
        for method in pattern.callback.api_methods:
            yield pattern, method


def test_every_endpoint_has_an_access_rule():
    found = {(p.name, m) for p, m in endpoints()}
    assert found == set(RULES), f"missing: {found - set(RULES)}; stale: {set(RULES) - found}"


@pytest.fixture
def world(game_save, monkeypatch):
    from tests.fakes import make_vector_memory

    vm = make_vector_memory()
    vm.embed_chunk(game_save.save_id, 1, "The harbour at dawn.")
    monkeypatch.setattr("studio.memory.vector.get_vector_memory", lambda: vm)
    job = Job.objects.create(kind=JobKind.EMBED_TURN, game_save=game_save, turn_id=1, status=JobStatus.FAILED)
    from studio.memory.chapters.models import Chapter

    chapter = Chapter.objects.create(
        game_save=game_save,
        first_turn=1,
        last_turn=1,
        closed_turn=1,
        close_reason="playtester",
        summary_status="no_model",
    )
    from studio.universes.memory_tests.services import memory_test_create

    memory_test_create(
        universe=game_save.universe, data={"name": "kael-known", "kind": "knows", "character": "Kaël", "entry": "kael"}
    )
    return {
        "save_id": game_save.save_id,
        "turn_id": 1,
        "job_id": job.pk,
        "slug": game_save.universe.slug,
        "chapter_id": chapter.pk,
        "name": "kael-known",
    }


def url_for(pattern: URLPattern, world: dict) -> str:
    path = "/api/v1/" + str(pattern.pattern)
    for name in pattern.pattern.converters:
        path = path.replace(f"<str:{name}>", str(world[name])).replace(f"<int:{name}>", str(world[name]))
    return path


def call(client, method: str, path: str, payload):
    if method == "GET":
        return client.get(path, payload or {})
    body = "{}" if payload is None else __import__("json").dumps(payload)
    headers = {"Authorization": f"Bearer {client.key}"}
    return getattr(client.client, method.lower())(path, body, content_type="application/json", headers=headers)


@pytest.mark.parametrize("name, method", sorted(RULES))
def test_access_rule(name, method, world, make_api, outsider, member_without_role, playtester, staff_user, author):
    pattern = next(p for p, m in endpoints() if p.name == name and m == method)
    kind, payload, ok_status = RULES[(name, method)]
    path = url_for(pattern, world)
    outsider_status = call(make_api(outsider), method, path, payload).status_code
    reader_status = call(make_api(member_without_role), method, path, payload).status_code
    if kind == "open":
        assert outsider_status == ok_status and reader_status == ok_status
    elif kind == "read":
        assert outsider_status == 404
        assert reader_status == ok_status
        # Staff see every universe without being members.
        assert call(make_api(staff_user), method, path, payload).status_code == ok_status
    else:  # write / create: no existence leak to outsiders, 403 for a member without the role
        assert outsider_status == 404
        assert reader_status == 403
    if kind == "edit":
        assert call(make_api(playtester), method, path, payload).status_code == 403
        response = call(make_api(author), method, path, payload)
    else:
        response = call(make_api(playtester), method, path, payload)
    assert response.status_code == ok_status, response.content[:300]
