"""The scripted narrator and a universe with narrator meta, registered for the whole suite by
tests/conftest.py (`pytest_plugins`): the saves, API and memory tests narrate with them."""

from __future__ import annotations

import pytest

from studio.world.models import UniverseMeta
from tests.llm_server import Reply, operation_of, scripted_pipeline_responder, serve_as_studio_model

STORY = "Rain drums on the harbour roofs. Mira looks up from her ledger and smiles at you."


class Narrator:
    """The scripted server's answer to narrator requests; everything else gets the pipeline's."""

    def __init__(self):
        self.reply = Reply(content=STORY)
        self.pipeline = scripted_pipeline_responder()

    def __call__(self, request):
        if operation_of(request) == "narrate":
            return self.reply
        return self.pipeline(request)


@pytest.fixture
def narrator(settings, eager_jobs, vector_memory):
    script = Narrator()
    with serve_as_studio_model(settings, script) as server:
        script.server = server
        yield script


@pytest.fixture
def meta(universe):
    for key, value in {
        "player_character": "Wren Halloway",
        "narrator_style": "terse, present tense",
        "tone": "melancholy",
        "era": "forty-one years after the Long Tide",
        "season": "late autumn",
    }.items():
        UniverseMeta.objects.create(universe=universe, key=key, value=value)
    return universe
