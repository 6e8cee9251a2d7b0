"""Fixtures of the memory proxy's tests: the scripted upstream, a save to play, a key for it.

`upstream` is the project's scripted OpenAI-compatible server (tests/llm_server.py) as the
studio's model: the living pipeline's operations get the pipeline's fixed answers, and any
other request (the proxy's relays) a narration that names the player's last message and a
running number, so two answers to the same message (a swipe) differ.
"""
from __future__ import annotations

import itertools

import pytest

from studio.world.models import MemoryMode
from studio.saves.services import save_create
from tests.llm_server import Reply, operation_of, scripted_pipeline_responder, serve_as_studio_model


def last_user(request: dict) -> str:
    for message in reversed(request.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else str(content)
    return ""


class Upstream:
    """Answers the proxy's relays; the living pipeline's requests get the pipeline's answers."""

    def __init__(self):
        self.pipeline = scripted_pipeline_responder()
        self.counter = itertools.count(1)
        self.relayed: list[dict] = []
        self.reply: Reply | None = None  # a fixed reply for the next relays, when set

    def answer_for(self, text: str, n: int) -> str:
        return f"Answer {n}: the tide turns as you say '{text[:40]}'."

    def __call__(self, request):
        if operation_of(request):
            return self.pipeline(request)
        self.relayed.append(request)
        if self.reply is not None:
            return self.reply
        return Reply(content=self.answer_for(last_user(request), next(self.counter)))


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
