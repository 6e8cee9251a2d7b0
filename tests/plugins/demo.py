"""The demo save with its turns and lore embedded (the hashing embedder), registered for the whole
suite by tests/conftest.py (`pytest_plugins`): the memory, API and browser tests ask it the same
question (`QUESTION`)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from studio.world.models import Save

QUESTION = "ask Hesper Vale about the Copper Hood"


@pytest.fixture
def demo(vector_memory):
    call_command("load_demo", "--no-embed", "--no-knowledge", stdout=io.StringIO())
    save = Save.objects.get(save_id="drowned-reach-demo")
    vector_memory.embed_chunks(save.save_id, [{"turn_id": e.turn_id, "text": e.narrative} for e in save.events.all()])
    vector_memory.sync_lore(
        save.save_id,
        [
            {
                "entry_id": e.entry_id,
                "title": e.title,
                "text": e.text,
                "links": [link.entry_id for link in e.links.all()],
            }
            for e in save.universe.lore_entries.prefetch_related("links")
        ],
    )
    return save
