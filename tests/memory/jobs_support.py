"""Fixtures for the job and pipeline tests (imported by those test modules).

`fake_vectors` replaces the vector store with a recorder (the real VectorMemory has its own
tests; these tests are about what the jobs ask of it). `llm_server` starts the scripted
OpenAI-compatible server and points the settings at it. `eager_jobs` runs each job inline
when its transaction commits.
"""
from __future__ import annotations

import threading

import pytest

from studio.memory.jobs import registry
from tests.llm_server import ScriptedLLMServer, scripted_pipeline_responder


class FakeVectorMemory:
    """Records calls; keeps narrative chunks in memory ({chunk id: (save_id, turn, text)}) so
    tests can see what a turn ends up with (duplicates included). `update_turn_narrative`
    replaces one turn's chunks and `update_turn_narratives` several turns' with one call (one
    corpus-version bump, `bumps`), as in VectorMemory."""

    def __init__(self):
        self.calls: list[tuple] = []
        self.lock = threading.Lock()
        self.fail_with: Exception | None = None
        self.chunks: dict[str, tuple[str, int, str]] = {}
        self.next_id = 0
        self.bumps = 0

    def texts(self, save_id) -> dict[int, list[str]]:
        """{turn: [texts]} of a save's narrative chunks."""
        out: dict[int, list[str]] = {}
        for sid, turn, text in self.chunks.values():
            if sid == save_id:
                out.setdefault(turn, []).append(text)
        return out

    def _store(self, save_id, turn_id, text):
        self.next_id += 1
        self.chunks[f"c{self.next_id}"] = (save_id, int(turn_id), text)

    def update_turn_narratives(self, save_id, texts, chunk_type="narrative"):
        texts = {int(turn): text for turn, text in texts.items()}
        self._record("update_turn_narratives", save_id, sorted(texts.items()))
        for cid in [cid for cid, (sid, turn, _t) in self.chunks.items() if sid == save_id and turn in texts]:
            del self.chunks[cid]
        for turn in sorted(texts):
            if str(texts[turn]).strip():
                self._store(save_id, turn, texts[turn])
        self.bumps += 1

    def _record(self, *call):
        with self.lock:
            self.calls.append(call)
        if self.fail_with is not None:
            raise self.fail_with

    def sync_lore(self, save_id, entries):
        self._record("sync_lore", save_id, [dict(e) for e in entries])
        return len(entries)

    def update_turn_narrative(self, save_id, turn_id, new_text, chunk_type="narrative"):
        self._record("update_turn_narrative", save_id, turn_id, new_text)
        for cid in [cid for cid, (sid, turn, _t) in self.chunks.items() if sid == save_id and turn == turn_id]:
            del self.chunks[cid]
        self._store(save_id, turn_id, new_text)

    def rollback(self, save_id, target_turn_id):
        self._record("rollback", save_id, target_turn_id)
        gone = [cid for cid, (sid, turn, _t) in self.chunks.items() if sid == save_id and turn > target_turn_id]
        for cid in gone:
            del self.chunks[cid]
        return len(gone)

    def named(self, name):
        return [c for c in self.calls if c[0] == name]


@pytest.fixture
def fake_vectors(monkeypatch):
    vectors = FakeVectorMemory()
    monkeypatch.setattr(registry, "default_vector_memory", lambda: vectors)
    return vectors


@pytest.fixture
def eager_jobs(settings):
    settings.AXIOM_JOBS_EAGER = True
    settings.REDIS_URL = ""
    settings.AXIOM_JOB_MAX_ATTEMPTS = 1
    settings.AXIOM_JOB_RETRY_BACKOFF = 0
    return settings


@pytest.fixture
def llm_server(settings):
    server = ScriptedLLMServer(scripted_pipeline_responder()).start()
    settings.AXIOM_LLM_BASE_URL = server.base_url
    settings.AXIOM_LLM_MODEL = "test-model"
    settings.AXIOM_LLM_MAX_RETRIES = 1
    settings.AXIOM_LLM_TIMEOUT = 5
    yield server
    server.stop()


@pytest.fixture
def living_universe(universe):
    """The shared universe plus per-character missions (one for a character not in play)."""
    from studio.universes.models import UniverseMeta

    UniverseMeta.objects.create(
        universe=universe,
        key="belief_missions",
        value='{"Kaël": "Remembers every slight.", "Mirela": "Remembers prices."}',
    )
    return universe
