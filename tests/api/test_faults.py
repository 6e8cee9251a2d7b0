"""The API when what it stands on fails: Redis, the Chroma server, a locked SQLite file."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from studio.memory.jobs import QUEUE_DOWN_PREFIX
from studio.memory.models import Job, JobKind, JobStatus
from studio.world.models import Event
from tests.fakes import HashingEmbedder

from tests.support.api_errors import error_code
from tests.support.processes import free_port

CHROMA = Path(sys.executable).parent / "chroma"


@pytest.mark.django_db
def test_redis_down_keeps_the_turn_and_shows_a_retryable_failed_job(
    api, game_save, settings, django_capture_on_commit_callbacks
):
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    settings.AXIOM_JOBS_EAGER = False
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(f"/api/v1/saves/{game_save.save_id}/turns", {"narrative": "The queue is down."})
    assert response.status_code == 201
    assert Event.objects.get(game_save=game_save, turn_id=4).narrative == "The queue is down."
    failed = api.get(f"/api/v1/saves/{game_save.save_id}/jobs", {"status": "failed", "turn_id": 4}).json()["items"]
    assert [j["kind"] for j in failed] == [JobKind.EMBED_TURN]
    assert failed[0]["error"].startswith(QUEUE_DOWN_PREFIX)
    # The queue is back (in-process runner): the engine retries the job through the API.
    settings.REDIS_URL = ""
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        retried = api.post(f"/api/v1/saves/{game_save.save_id}/jobs/{failed[0]['id']}/retry")
    assert retried.status_code == 200 and retried.json()["status"] == "queued"
    assert callbacks  # the dispatch waits for the commit
    assert Job.objects.get(pk=failed[0]["id"]).status == JobStatus.QUEUED


@pytest.fixture
def chroma_server(tmp_path):
    port = free_port()
    proc = subprocess.Popen(
        [str(CHROMA), "run", "--path", str(tmp_path / "chroma"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import httpx

    for _ in range(150):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("chroma server did not start")
    yield proc, port
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.mark.django_db
def test_chroma_server_dying_mid_run_degrades_to_lexical_and_other_reads_still_work(
    api, game_save, chroma_server, monkeypatch
):
    import chromadb
    from chromadb.config import Settings

    from studio.memory.vector import LocalCorpusVersions, VectorMemory

    proc, port = chroma_server
    client = chromadb.HttpClient(host="127.0.0.1", port=port, settings=Settings(anonymized_telemetry=False))
    vm = VectorMemory(None, client=client, embedder=HashingEmbedder(), versions=LocalCorpusVersions())
    vm.embed_chunk(game_save.save_id, 1, "The lighthouse keeper counts the ships.")
    vm.embed_chunk(game_save.save_id, 2, "A smuggler hides in the harbour.")
    vm.embed_chunk(game_save.save_id, 3, "Bread is sold at the market.")
    monkeypatch.setattr("studio.memory.vector.get_vector_memory", lambda: vm)
    url = f"/api/v1/saves/{game_save.save_id}/query"
    first = api.post(url, {"query_text": "lighthouse ships"})
    assert first.status_code == 200 and first.json()["results"][0]["turn_id"] == 1
    assert first.json()["warnings"] == []

    proc.kill()
    proc.wait()
    # The process has the save's corpus cached: the query answers from the lexical arms and
    # says so, instead of failing.
    down = api.post(url, {"query_text": "lighthouse ships"})
    assert down.status_code == 200
    assert down.json()["results"][0]["turn_id"] == 1
    assert any("vector store is unreachable" in w for w in down.json()["warnings"])
    # A save this process has never read has nothing to fall back on: a clear, retryable 503.
    cold = VectorMemory(None, client=client, embedder=HashingEmbedder(), versions=LocalCorpusVersions())
    monkeypatch.setattr("studio.memory.vector.get_vector_memory", lambda: cold)
    refused = api.post(url, {"query_text": "lighthouse ships"})
    assert refused.status_code == 503
    assert error_code(refused) == "vector_store_unavailable"
    assert refused["Retry-After"]
    assert api.get(f"/api/v1/saves/{game_save.save_id}/beliefs").status_code == 200
    appended = api.post(f"/api/v1/saves/{game_save.save_id}/turns", {"narrative": "Still playing."})
    assert appended.status_code == 201  # the turn is kept; its embedding job runs when Chroma is back


@pytest.mark.django_db(transaction=True)
def test_a_locked_sqlite_database_is_503_and_the_write_goes_through_after(make_api, playtester, game_save):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite locking")
    api = make_api(playtester)
    url = f"/api/v1/saves/{game_save.save_id}/turns"
    assert api.get(f"/api/v1/saves/{game_save.save_id}").status_code == 200  # token use recorded now
    options = connection.settings_dict["OPTIONS"]
    saved_timeout = options.get("timeout")
    connection.close()
    options["timeout"] = 0.3  # fail fast instead of waiting 20 s
    holder = sqlite3.connect(connection.settings_dict["NAME"], timeout=0.1)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        response = api.post(url, {"narrative": "Blocked."})
        assert response.status_code == 503
        assert error_code(response) == "database_busy"
        assert response["Retry-After"]
        holder.rollback()
        again = api.post(url, {"narrative": "Through."})
        assert again.status_code == 201
        assert list(Event.objects.filter(game_save=game_save).values_list("narrative", flat=True))[-1] == "Through."
        assert not Event.objects.filter(narrative="Blocked.").exists()
    finally:
        holder.close()
        connection.close()
        options["timeout"] = saved_timeout
