"""Memory search and the assembled memory context through the API, on a real vector store."""

from __future__ import annotations


import pytest
from jsonschema import Draft202012Validator

from studio.api.openapi import build_openapi
from studio.memory import mental_models as MM
from studio.memory.models import RecordedQuery
from studio.memory.vector import VectorStoreError, reset_vector_memory

from tests.support.api_errors import error_code
from tests.support.processes import free_port
from tests.fakes import make_vector_memory

pytestmark = pytest.mark.django_db


def schema(name: str) -> Draft202012Validator:
    return Draft202012Validator({**build_openapi(), "$ref": f"#/components/schemas/{name}"})


@pytest.fixture
def memory(monkeypatch, game_save):
    vm = make_vector_memory()
    texts = {
        1: "Kael bargains with the harbour master over a crate of lamp oil.",
        2: "A storm closes the harbour and Mira hides the smuggled silver.",
        3: "Kael repays Mira ten crowns at the Drowned Lantern tavern.",
        # A chunk a failed rewind left behind: beyond the save's current turn (3).
        5: "Kael betrays Mira to the harbour guard.",
    }
    for turn, text in texts.items():
        vm.embed_chunk(game_save.save_id, turn, text)
    vm.embed_chunk(
        game_save.save_id,
        0,
        "Port Vey is a harbour town of smugglers.",
        chunk_type="lore",
        metadata_extra={"entry_id": "port-vey"},
    )
    monkeypatch.setattr("studio.memory.vector.get_vector_memory", lambda: vm)
    return vm


def test_query_returns_ranked_chunks_with_ids_and_explain(api, game_save, memory):
    response = api.post(f"/api/v1/saves/{game_save.save_id}/query", {"query_text": "Kael repays Mira", "k": 3})
    assert response.status_code == 200
    body = response.json()
    schema("QueryResult").validate(body)
    assert body["current_turn_id"] == 3 and body["warnings"] == []
    assert len(body["results"]) == 3
    top = body["results"][0]
    assert top["turn_id"] == 3 and "ten crowns" in top["text"]
    assert top["id"] and top["explain"]["final_rank"] == 1
    assert top["explain"]["lexical_rank"] is not None and top["explain"]["semantic_rank"] is not None
    assert body["stats"]["corpus_size"] == 5


def test_query_never_returns_chunks_beyond_the_current_turn(api, game_save, memory):
    url = f"/api/v1/saves/{game_save.save_id}/query"
    body = api.post(url, {"query_text": "Kael betrays Mira to the guard", "k": 10, "current_turn_id": 99}).json()
    assert body["current_turn_id"] == 3
    assert all(r["turn_id"] <= 3 for r in body["results"])
    assert not any("betrays" in r["text"] for r in body["results"])


def test_query_filters(api, game_save, memory):
    url = f"/api/v1/saves/{game_save.save_id}/query"
    lore = api.post(url, {"query_text": "harbour", "chunk_type": "lore"}).json()["results"]
    assert [r["entry_id"] for r in lore] == ["port-vey"]
    no_lore = api.post(url, {"query_text": "harbour", "exclude_chunk_type": "lore", "k": 10}).json()["results"]
    assert no_lore and all(r["chunk_type"] == "narrative" for r in no_lore)
    early = api.post(url, {"query_text": "harbour Kael Mira", "max_turn_id": 1, "k": 10}).json()["results"]
    assert {r["turn_id"] for r in early} <= {0, 1}


def test_query_by_get_with_repeated_focus_terms(api, game_save, memory):
    url = f"/api/v1/saves/{game_save.save_id}/query"
    response = api.get(url + "?query_text=harbour&k=4&focus_terms=Mira&focus_terms=silver&exclude_chunk_type=lore")
    assert response.status_code == 200
    results = response.json()["results"]
    boosted = [r for r in results if r["explain"]["focus_boost"]]
    assert boosted and all("Mira" in r["text"] for r in boosted)


def test_query_validation(api, game_save, memory):
    url = f"/api/v1/saves/{game_save.save_id}/query"
    response = api.post(url, {"k": 0, "focus_terms": "Mira"})
    assert response.status_code == 400
    assert set(response.json()["error"]["details"]) == {"query_text", "k", "focus_terms"}


def test_recording_a_query_needs_the_role(api, make_api, member_without_role, game_save, memory):
    url = f"/api/v1/saves/{game_save.save_id}/query"
    reader = make_api(member_without_role)
    assert reader.post(url, {"query_text": "harbour"}).status_code == 200
    assert reader.post(url, {"query_text": "harbour", "record": True}).status_code == 403
    assert not RecordedQuery.objects.exists()
    assert api.post(url, {"query_text": "harbour", "record": True}).status_code == 200
    recorded = RecordedQuery.objects.get()
    assert recorded.query_text == "harbour" and recorded.turn_id == 3 and recorded.result_ids


def test_query_of_another_universe_is_404(api, other_universe_save, memory):
    assert api.post(f"/api/v1/saves/{other_universe_save.save_id}/query", {"query_text": "x"}).status_code == 404


def test_query_without_the_embedding_model_says_so(api, game_save, monkeypatch):
    from studio.memory.embeddings import embedding

    monkeypatch.setattr(embedding, "get_embedder", lambda: None)
    vm = make_vector_memory(embedder=None)
    monkeypatch.setattr("studio.memory.vector.get_vector_memory", lambda: vm)
    body = api.post(f"/api/v1/saves/{game_save.save_id}/query", {"query_text": "harbour"}).json()
    assert body["stats"]["semantic_available"] is False
    assert body["warnings"] and "semantic" in body["warnings"][0]


def test_vector_store_error_is_503(api, game_save, monkeypatch):
    def down():
        raise VectorStoreError("Chroma unavailable")

    monkeypatch.setattr("studio.memory.vector.get_vector_memory", down)
    response = api.post(f"/api/v1/saves/{game_save.save_id}/query", {"query_text": "harbour"})
    assert response.status_code == 503
    assert error_code(response) == "vector_store_unavailable"
    assert response["Retry-After"]


def test_an_unreachable_chroma_server_is_503(api, game_save, settings):
    """The real client against a port nobody listens on: 503, and the next request is too."""
    settings.CHROMA_HOST = "127.0.0.1"
    settings.CHROMA_PORT = free_port()
    reset_vector_memory()
    try:
        for _ in range(2):
            response = api.post(f"/api/v1/saves/{game_save.save_id}/query", {"query_text": "harbour"})
            assert response.status_code == 503
            assert error_code(response) == "vector_store_unavailable"
        # Reads that do not need vectors keep working.
        assert api.get(f"/api/v1/saves/{game_save.save_id}/turns").status_code == 200
    finally:
        reset_vector_memory()


def test_context_assembles_the_layers(api, game_save, memory):
    game_save.memory_mode = "living"
    game_save.save()
    MM.upsert_mental_model(game_save.save_id, "Kael", "Kael, a smuggler who pays his debts.", 3, [])
    response = api.post(
        f"/api/v1/saves/{game_save.save_id}/context",
        {"query_text": "Kael at the harbour", "focus_terms": ["Kael"], "token_budget": 400},
    )
    assert response.status_code == 200
    body = response.json()
    schema("MemoryContext").validate(body)
    layers = [item["layer"] for item in body["items"]]
    # The story so far (the save's turns in full, `chapter`) comes first; then the recall hierarchy.
    recalled = [layer for layer in layers if layer not in ("story", "chapter")]
    assert "chapter" in layers and recalled[0] == "mental_model" and "narrative" in layers and "lore" in layers
    assert "Kael, a smuggler who pays his debts." in body["text"]
    assert body["used_tokens"] <= 400 and body["subjects"] == ["kael"]
    assert not any("betrays" in item["text"] for item in body["items"])


def test_context_cuts_what_does_not_fit_and_accepts_get(api, game_save, memory):
    response = api.get(f"/api/v1/saves/{game_save.save_id}/context", {"query_text": "harbour", "token_budget": 12})
    assert response.status_code == 200
    body = response.json()
    assert body["used_tokens"] <= 12
    assert any(not item["included"] and item["cut"] for item in body["items"])


def test_context_validation_and_record_role(api, make_api, member_without_role, game_save, memory):
    url = f"/api/v1/saves/{game_save.save_id}/context"
    response = api.post(url, {"token_budget": 0, "k_lore": "many"})
    assert response.status_code == 400
    assert set(response.json()["error"]["details"]) == {"token_budget", "k_lore"}
    assert make_api(member_without_role).post(url, {"query_text": "x", "record": True}).status_code == 403
    assert api.post(url, {"query_text": "harbour", "record": True}).status_code == 200
    assert RecordedQuery.objects.filter(game_save=game_save).count() == 2


def test_query_keeps_a_lower_horizon(api, game_save, memory):
    body = api.post(
        f"/api/v1/saves/{game_save.save_id}/query", {"query_text": "Kael Mira harbour", "k": 10, "current_turn_id": 1}
    ).json()
    assert body["current_turn_id"] == 1
    assert {r["turn_id"] for r in body["results"]} == {0, 1}  # the lore entry (turn 0) and turn 1


def test_query_and_context_go_through_the_one_clamp(api, game_save, memory, stricter_clamp):
    body = api.post(
        f"/api/v1/saves/{game_save.save_id}/query", {"query_text": "Kael repays Mira", "k": 10, "current_turn_id": 99}
    ).json()
    assert body["current_turn_id"] == 2
    assert body["results"] and max(r["turn_id"] for r in body["results"]) == 2
    context = api.post(
        f"/api/v1/saves/{game_save.save_id}/context", {"query_text": "Kael repays Mira", "k_narrative": 10}
    ).json()
    narrative = [i for i in context["items"] if i["layer"] == "narrative"]
    assert narrative and max(i["ref"]["turn_id"] for i in narrative) == 2
