"""Fixtures of the memory proxy's tests: the scripted upstream, a save to play, a key for it.

`upstream` is the project's scripted OpenAI-compatible server (tests/llm_server.py) as the
studio's model: the living pipeline's operations get the pipeline's fixed answers, and any
other request (the proxy's relays) a narration that names the player's last message and a
running number, so two answers to the same message (a swipe) differ.
"""

from __future__ import annotations

import pytest

from studio.world.models import MemoryMode
from studio.saves.services import save_create
from tests.llm_server import serve_as_studio_model
from tests.support.upstream import Upstream


@pytest.fixture
def upstream(settings, eager_jobs, vector_memory):
    settings.AXIOM_PROXY_MODELS = ["story-model"]  # besides the studio's own (test-model): tests/proxy/test_spending.py
    script = Upstream()
    with serve_as_studio_model(settings, script) as server:
        script.server = server
        yield script


@pytest.fixture
def proxy(make_api, playtester):
    """An API client with the playtester's key (what a front end sends as its API key)."""
    return make_api(playtester, "front end")


@pytest.fixture
def play_save(universe):
    return save_create(universe=universe, name="Proxy run", memory_mode=MemoryMode.LIVING)
