"""The vector store going down degrades a query to the lexical arms; it does not fail it."""

from __future__ import annotations

import httpx
import pytest

from studio.memory.vector import VectorMemory, VectorStoreError
from tests.fakes import HashingEmbedder


@pytest.fixture
def three_turns_vm(vm):
    vm.embed_chunk("s1", 1, "Kaël the smuggler docks at Port Vey at dawn")
    vm.embed_chunk("s1", 2, "A storm batters the lighthouse on the northern cliffs")
    vm.embed_chunk("s1", 3, "Mira sells salted fish in the market of Port Vey")
    return vm


def break_store(three_turns_vm, monkeypatch):
    """Every collection call from now on fails the way an unreachable Chroma server does."""

    def down(*args, **kwargs):
        raise httpx.ConnectError("connection refused")

    # Every read and write of a scope's collection goes through ChunkStore.call.
    monkeypatch.setattr(three_turns_vm.store, "call", down)


def test_warm_query_falls_back_to_the_lexical_arms_with_a_warning(three_turns_vm, monkeypatch):
    healthy = three_turns_vm.query_explained("s1", "smuggler at Port Vey", k=3)
    assert healthy.stats.semantic_available and not healthy.stats.vector_store_error
    break_store(three_turns_vm, monkeypatch)
    # A write elsewhere moved the corpus version: the reload fails, the cached corpus answers.
    three_turns_vm._bump("s1")
    degraded = three_turns_vm.query_explained("s1", "smuggler at Port Vey", k=3)
    assert not degraded.stats.semantic_available
    assert "ConnectError" in degraded.stats.vector_store_error
    assert degraded.results and degraded.results[0]["turn_id"] == 1
    assert all(r["explain"]["semantic_rank"] is None for r in degraded.results)
    assert degraded.results[0]["explain"]["lexical_rank"] == 1


def test_cold_query_with_the_store_down_is_a_clear_error(three_turns_vm, monkeypatch):
    break_store(three_turns_vm, monkeypatch)
    with pytest.raises((VectorStoreError, httpx.ConnectError)):
        three_turns_vm.query("s1", "smuggler", k=3)


def test_api_answers_with_a_warning_not_an_error(client, game_save, playtester, monkeypatch, tmp_path):
    from studio.api.services import api_token_create

    memory = VectorMemory(str(tmp_path / "api-chroma"), embedder=HashingEmbedder())
    memory.embed_chunk(game_save.save_id, 1, "Kaël the smuggler docks at Port Vey")
    memory.embed_chunk(game_save.save_id, 2, "A storm batters the lighthouse")
    memory.embed_chunk(game_save.save_id, 3, "Mira sells fish in the market")
    monkeypatch.setattr("studio.memory.vector.get_vector_memory", lambda: memory)
    _, key = api_token_create(user=playtester, name="engine")
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    url = f"/api/v1/saves/{game_save.save_id}/query"
    assert client.post(url, {"query_text": "smuggler"}, content_type="application/json", **headers).status_code == 200
    break_store(memory, monkeypatch)
    memory._bump(game_save.save_id)
    response = client.post(url, {"query_text": "smuggler"}, content_type="application/json", **headers)
    assert response.status_code == 200
    body = response.json()
    assert any("vector store is unreachable" in w for w in body["warnings"])
    assert body["results"] and body["results"][0]["turn_id"] == 1
    memory.close()
