"""The embedded store's process lock and the settings-driven factory."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from studio.memory import vector
from studio.memory.vector import (
    LocalCorpusVersions,
    VectorMemory,
    VectorStoreLockedError,
    get_vector_memory,
    reset_vector_memory,
)
from tests.fakes import HashingEmbedder

ROOT = Path(__file__).resolve().parents[3]


def open_in_other_process(path: str) -> subprocess.CompletedProcess:
    """Try to open the embedded store at `path` from a fresh Python process."""
    script = textwrap.dedent(
        f"""
        import sys
        from studio.memory.vector import VectorMemory, VectorStoreLockedError, LocalCorpusVersions
        try:
            vm = VectorMemory({path!r}, versions=LocalCorpusVersions())
        except VectorStoreLockedError as exc:
            print(exc)
            sys.exit(3)
        print("opened")
        """
    )
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_second_process_fails_at_once_with_a_clear_message(tmp_path):
    path = str(tmp_path / "chroma")
    vm = VectorMemory(path, versions=LocalCorpusVersions(), embedder=HashingEmbedder())
    try:
        other = open_in_other_process(path)
        assert other.returncode == 3, other.stderr
        assert "already open in another process" in other.stdout
        assert f"pid {os.getpid()}" in other.stdout
        assert "chroma run" in other.stdout and "CHROMA_HOST" in other.stdout
    finally:
        vm.close()
    # Once released, another process may open it.
    other = open_in_other_process(path)
    assert other.returncode == 0, other.stdout + other.stderr
    assert "opened" in other.stdout


def test_lock_is_reentrant_within_one_process(tmp_path):
    path = str(tmp_path / "chroma")
    first = VectorMemory(path, versions=LocalCorpusVersions())
    second = VectorMemory(path, versions=LocalCorpusVersions())
    first.close()
    assert open_in_other_process(path).returncode == 3  # `second` still holds it
    second.close()
    assert open_in_other_process(path).returncode == 0


def _child_tries(path, queue):
    try:
        vector.acquire_store_lock(path)
        queue.put("acquired")
    except VectorStoreLockedError as exc:
        queue.put(str(exc))


def test_forked_child_cannot_use_the_parents_store(tmp_path):
    path = str(tmp_path / "chroma")
    vm = VectorMemory(path, versions=LocalCorpusVersions())
    try:
        context = multiprocessing.get_context("fork")
        queue = context.Queue()
        child = context.Process(target=_child_tries, args=(path, queue))
        child.start()
        child.join(60)
        message = queue.get(timeout=5)
        assert "already open in another process" in message
    finally:
        vm.close()


@pytest.fixture
def fresh_factory():
    reset_vector_memory()
    yield
    reset_vector_memory()


def test_factory_opens_locked_embedded_store_from_settings(settings, tmp_path, fresh_factory):
    settings.CHROMA_HOST = ""
    settings.CHROMA_PATH = str(tmp_path / "store")
    settings.AXIOM_RERANKER_MODEL = ""
    settings.AXIOM_RERANK_POOL = 7
    vm = get_vector_memory()
    assert get_vector_memory() is vm
    assert vm.persist_dir == settings.CHROMA_PATH
    assert vm.reranker is None
    assert vm.config.rerank_pool == 7
    assert (tmp_path / "store" / vector.LOCK_FILE_NAME).exists()
    assert open_in_other_process(settings.CHROMA_PATH).returncode == 3
    reset_vector_memory()
    assert open_in_other_process(settings.CHROMA_PATH).returncode == 0


def test_factory_uses_http_client_when_chroma_host_is_set(settings, tmp_path, monkeypatch, fresh_factory):
    import chromadb

    made = {}

    class FakeHttpClient:
        def __init__(self, host, port, settings):
            made.update(host=host, port=port, telemetry=settings.anonymized_telemetry)

    monkeypatch.setattr(chromadb, "HttpClient", FakeHttpClient)
    settings.CHROMA_HOST = "127.0.0.1"
    settings.CHROMA_PORT = 8123
    settings.CHROMA_PATH = str(tmp_path / "unused")
    settings.AXIOM_RERANKER_MODEL = "/no/such/cross-encoder"
    vm = get_vector_memory()
    assert made == {"host": "127.0.0.1", "port": 8123, "telemetry": False}
    assert isinstance(vm._client, FakeHttpClient)
    assert not (tmp_path / "unused").exists()  # no embedded store, no lock
    assert vm.reranker is not None and vm.reranker.model_name == "/no/such/cross-encoder"


def test_factory_reads_settings_at_call_time(settings, tmp_path, fresh_factory):
    settings.CHROMA_HOST = ""
    settings.CHROMA_PATH = str(tmp_path / "one")
    assert get_vector_memory().persist_dir.endswith("one")
    reset_vector_memory()
    settings.CHROMA_PATH = str(tmp_path / "two")
    assert get_vector_memory().persist_dir.endswith("two")


def test_embedded_client_has_telemetry_off(tmp_path):
    vm = VectorMemory(str(tmp_path / "c"), versions=LocalCorpusVersions())
    try:
        assert vm._client.get_settings().anonymized_telemetry is False
    finally:
        vm.close()
