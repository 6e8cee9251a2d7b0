"""The API's answers to the probe of issue 31: strict types, the field named, no 500, no lost update."""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from studio.memory.chapters.services import ChapterError, chapter_close, chapter_summary_edit
from studio.saves.checkpoints import CheckpointManager
from studio.saves.models import PlaySettings
from studio.world.models import Save
from studio.saves.narrator.play_settings import play_settings_update
from tests.support.api_errors import error_code
from tests.fakes import FakeVectorMemory

pytestmark = pytest.mark.django_db


def settings_url(game_save):
    return f"/api/v1/saves/{game_save.save_id}/play-settings"


def patch(api, game_save, body=None, raw=None):
    data = raw if raw is not None else __import__("json").dumps(body)
    return api.client.patch(settings_url(game_save), data, content_type="application/json", headers=api._headers())


@pytest.mark.parametrize(
    "body",
    [
        {"temperature": True},
        {"top_p": "1"},
        {"max_tokens": 1.5},
        {"authors_note_depth": True},
        {"authors_note": "x" * 2001},
        {"authors_note": "a\u0000b"},
        {"temperature": 2.5},
    ],
)
def test_play_settings_take_json_types_as_sent(api, game_save, body):
    """`{"temperature": true}` and `{"top_p": "1"}` were stored as 1.0."""
    response = patch(api, game_save, body)
    assert response.status_code == 400 and error_code(response) == "validation_error"
    assert list(response.json()["error"]["details"]) == [next(iter(body))]
    assert not PlaySettings.objects.filter(game_save=game_save).exists()


def test_a_key_twice_in_a_body_is_refused(api, game_save):
    response = patch(api, game_save, raw='{"temperature": 0.5, "temperature": 0.9}')
    assert response.status_code == 400 and error_code(response) == "invalid_json"
    assert "twice" in response.json()["error"]["details"]["reason"]


@pytest.mark.django_db(transaction=True)
def test_two_patches_of_different_settings_keep_both(game_save):
    """Read without a lock and every column saved, one of two PATCHes was lost in 3 of 8 rounds."""
    for round_number in range(8):
        barrier = threading.Barrier(2)

        def change(changes):
            try:
                barrier.wait(timeout=10)
                play_settings_update(game_save=Save.objects.get(pk=game_save.pk), changes=changes)
            finally:
                connections.close_all()

        temperature, top_p = 0.1 + round_number / 10, 0.05 + round_number / 10
        threads = [
            threading.Thread(target=change, args=({"temperature": temperature},)),
            threading.Thread(target=change, args=({"top_p": top_p},)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        row = PlaySettings.objects.get(game_save=game_save)
        assert (row.temperature, row.top_p) == (temperature, top_p), f"round {round_number}"


@pytest.mark.parametrize(
    "path, field",
    [
        ("narrate", "pov"),
        ("narrate", "present"),
        ("context", "pov"),
        ("context", "focus_terms"),
        ("query", "pov"),
        ("query", "focus_terms"),
    ],
)
def test_a_name_over_200_characters_is_a_400_everywhere(api, game_save, path, field):
    """`narrate` answered 500 (InvalidParameters in the prompt), `/query` accepted it."""
    body = {"narrate": {"player_input": "I look."}, "context": {"query_text": "x"}, "query": {"query_text": "x"}}[path]
    response = api.post(f"/api/v1/saves/{game_save.save_id}/{path}", {**body, field: ["n" * 201]})
    assert response.status_code == 400 and error_code(response) == "validation_error"
    assert field in str(response.json()["error"]["details"])


def test_a_chapter_a_rewind_removed_is_a_clear_error_not_a_500(game_save, settings):
    """An edit or "summarise again" racing an undo found the chapter before the lock (Chapter.DoesNotExist)."""
    settings.AXIOM_LLM_BASE_URL = ""
    chapter = chapter_close(game_save=game_save)
    CheckpointManager(vector_memory=FakeVectorMemory()).rewind(game_save, 1)
    with pytest.raises(ChapterError, match="gone"):
        chapter_summary_edit(chapter=chapter, text="Too late.")
