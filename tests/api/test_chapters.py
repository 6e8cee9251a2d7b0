"""The chapter endpoints and the story so far in the API's context."""

from __future__ import annotations

import json

import pytest

from studio.memory.chapters.models import Chapter
from studio.world.models import UniverseMeta

pytestmark = pytest.mark.django_db


def test_close_edit_and_read_the_story_so_far(make_api, playtester, game_save, settings, monkeypatch):
    from tests.fakes import make_vector_memory

    vm = make_vector_memory()
    monkeypatch.setattr("studio.memory.vector.get_vector_memory", lambda: vm)
    settings.AXIOM_LLM_BASE_URL = ""
    api = make_api(playtester)
    base = f"/api/v1/saves/{game_save.save_id}/chapters"
    listed = api.get(base).json()
    assert listed["items"] == [] and listed["open_chapter"] == {"first_turn": 1, "current_turn": 3}
    closed = api.post(base + "/close", {"note": "end of act one"})
    assert closed.status_code == 201
    chapter = closed.json()
    assert (chapter["first_turn"], chapter["last_turn"], chapter["summary_status"]) == (1, 3, "no_model")
    assert api.post(base + "/close", {}).status_code == 409  # the open chapter is empty
    edited = api.client.patch(
        f"{base}/{chapter['id']}",
        json.dumps({"summary": "You spent three turns at sea."}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {api.key}"},
    )
    assert edited.status_code == 200 and edited.json()["edited"] is True
    assert api.post(f"{base}/{chapter['id']}/summarize").status_code == 409  # edited: the override stands
    context = api.post(f"/api/v1/saves/{game_save.save_id}/context", {"query_text": "sail on"}).json()
    # The recent turns reach back past the open chapter while their share holds them: turns 1-3 in full, so
    # their summary, which would tell them twice, is not in.
    assert context["shown_turns"] == [1, 2, 3] and not [i for i in context["items"] if i["layer"] == "story"]
    UniverseMeta.objects.create(universe=game_save.universe, key="context_recent_turns", value="1")
    context = api.post(f"/api/v1/saves/{game_save.save_id}/context", {"query_text": "sail on"}).json()
    story = [i for i in context["items"] if i["layer"] == "story"]
    assert (
        story and story[0]["text"] == "(turns 1-3) You spent three turns at sea." and story[0]["why"]["edited"] is True
    )
    assert "edited by a playtester" in story[0]["reason"]
    assert context["shown_turns"] == [3]  # the window's turn bound: the summary tells what it does not show
    assert Chapter.objects.get(pk=chapter["id"]).summary == "You spent three turns at sea."
