"""Fixtures for the job and pipeline tests, registered for the whole suite by tests/conftest.py
(`pytest_plugins`): the memory, saves and API tests all use them, so they are defined once here.

`llm_server` starts the scripted OpenAI-compatible server and points the settings at it.
`eager_jobs` runs each job inline when its transaction commits. The vector store these
tests stand on is the shared `fake_vectors` (tests/fakes.py, a global fixture).
"""

from __future__ import annotations

import pytest

from tests.llm_server import ScriptedLLMServer, scripted_pipeline_responder


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
    from studio.world.models import UniverseMeta

    UniverseMeta.objects.create(
        universe=universe,
        key="belief_missions",
        value='{"Kaël": "Remembers every slight.", "Mirela": "Remembers prices."}',
    )
    return universe
