"""The play controls over the API (studio/api/views_play.py): opening, continue, impersonate,
undo, retry, play settings. Against the scripted model server; the responses are checked
against the generated OpenAPI document."""

from __future__ import annotations

import json

import pytest

from studio.memory.models import LLMCall
from studio.saves.models import NarratorDraft, PlaySettings
from studio.world.models import Event
from tests.llm_server import Reply, operation_of, user_prompt
from tests.plugins.narrator import STORY
from tests.support.openapi import schema_validator

pytestmark = pytest.mark.django_db


def base(game_save) -> str:
    return f"/api/v1/saves/{game_save.save_id}"


def patch(api, path, body):
    return api.client.patch(path, json.dumps(body), content_type="application/json", headers=api._headers())


@pytest.fixture
def carded_save(universe, author):
    from studio.saves.services import save_create
    from studio.universes import services
    from studio.universes.interchange import character_card

    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Mira",
            "description": "A clerk.",
            "first_mes": "Mira looks up.",
            "alternate_greetings": ["Rain."],
        },
    }
    services.card_import(
        universe=universe, user=author, book=character_card.parse_card(json.dumps(card).encode(), filename="m.json")
    )
    return save_create(universe=universe, name="Fresh")


def test_opening_lists_the_greetings_and_appends_the_chosen_one(api, carded_save, eager_jobs, vector_memory):
    body = api.get(f"{base(carded_save)}/opening").json()
    schema_validator("Opening").validate(body)
    assert body["available"] and [g["text"] for g in body["greetings"]] == ["Mira looks up.", "Rain."]
    bad = api.post(f"{base(carded_save)}/opening", {"number": 3})
    assert bad.status_code == 400 and "number" in bad.json()["error"]["details"]
    response = api.post(f"{base(carded_save)}/opening", {"number": 2})
    assert response.status_code == 201, response.content
    schema_validator("TurnAppended").validate(response.json())
    assert Event.objects.get(game_save=carded_save, turn_id=1).narrative == "Rain."
    again = api.post(f"{base(carded_save)}/opening", {"number": 1})
    assert again.status_code == 409 and Event.objects.filter(game_save=carded_save).count() == 1
    assert api.get(f"{base(carded_save)}/opening").json()["available"] is False


def test_the_opening_reads_the_greetings_once_and_answers_one_status(
    api, carded_save, eager_jobs, vector_memory, monkeypatch
):
    """The service's check is the only one (the view read and checked the greetings again)."""
    from studio.saves.narrator import opening

    calls = []
    real = opening.universe_greetings
    monkeypatch.setattr(opening, "universe_greetings", lambda **kw: calls.append(1) or real(**kw))
    bad = api.post(f"{base(carded_save)}/opening", {"number": 3})
    assert bad.status_code == 400 and "2 greetings" in bad.json()["error"]["details"]["number"][0]
    assert len(calls) == 1
    assert api.post(f"{base(carded_save)}/opening", {"number": 1}).status_code == 201
    assert len(calls) == 2


def test_continue_extends_the_last_turn_and_appends_nothing(api, game_save, narrator):
    narrator.reply = Reply(content="The bell rings.")
    response = api.post(f"{base(game_save)}/continue", {})
    body = response.json()
    assert response.status_code == 200, body
    schema_validator("Continuation").validate(body)
    assert (body["addition"], body["narrative"], body["appended"]) == (
        "The bell rings.",
        "Turn 3 text. The bell rings.",
        False,
    )
    given = api.post(f"{base(game_save)}/continue", {"narrative": "You wait."}).json()
    assert given["narrative"] == "You wait. The bell rings."
    assert Event.objects.get(game_save=game_save, turn_id=3).narrative == "Turn 3 text."


def test_impersonate_answers_the_action(api, game_save, narrator):
    narrator.pipeline = lambda request: Reply(content='"You open the ledger."')
    response = api.post(f"{base(game_save)}/impersonate", {"mode": "do"})
    body = response.json()
    assert response.status_code == 200, body
    schema_validator("Impersonation").validate(body)
    assert body["action"] == "You open the ledger." and not NarratorDraft.objects.exists()
    assert LLMCall.objects.filter(game_save=game_save, operation="impersonate").count() == 1
    assert api.post(f"{base(game_save)}/impersonate", {"mode": "shout"}).status_code == 400


def test_undo_is_a_rewind_by_one_with_the_expected_turn(api, game_save, eager_jobs, vector_memory):
    stale = api.post(f"{base(game_save)}/undo", {"expected_current_turn": 2})
    assert stale.status_code == 409 and stale.json()["error"]["details"]["current_turn"] == 3
    response = api.post(f"{base(game_save)}/undo", {"expected_current_turn": 3})
    body = response.json()
    assert response.status_code == 200, body
    schema_validator("Undone").validate(body)
    assert body["player_input"] == "input 3" and body["save"]["current_turn"] == 2
    assert not Event.objects.filter(game_save=game_save, turn_id=3).exists()


def test_retry_undoes_and_proposes_again(api, game_save, narrator):
    response = api.post(f"{base(game_save)}/retry", {"expected_current_turn": 3})
    body = response.json()
    assert response.status_code == 200, body
    schema_validator("Retried").validate(body)
    assert body["narration"]["narrative"] == STORY and body["narration"]["turn_id"] == 3
    assert body["narration"]["player_input"] == "input 3"
    sent = [r for r in narrator.server.requests if operation_of(r) == "narrate"][-1]
    assert "input 3" in user_prompt(sent) and "Turn 3 text." not in user_prompt(sent)  # the undone turn is gone
    assert not Event.objects.filter(game_save=game_save, turn_id=3).exists()


def test_retry_without_a_model_changes_nothing(api, game_save, settings):
    settings.AXIOM_LLM_BASE_URL = ""
    response = api.post(f"{base(game_save)}/retry", {"expected_current_turn": 3})
    assert response.status_code == 503 and Event.objects.filter(game_save=game_save, turn_id=3).exists()


def test_play_settings_read_and_patch(api, game_save, narrator):
    body = api.get(f"{base(game_save)}/play-settings").json()
    schema_validator("PlaySettings").validate(body)
    assert body["authors_note"] == "" and body["overrides"]["temperature"] is None
    response = patch(
        api,
        f"{base(game_save)}/play-settings",
        {"authors_note": "Rain.", "authors_note_depth": 0, "temperature": 0.2, "max_tokens": 50},
    )
    body = response.json()
    assert response.status_code == 200, body
    schema_validator("PlaySettings").validate(body)
    assert body["effective"]["temperature"] == {"value": 0.2, "source": "save"} and body["authors_note_depth"] == 0
    bad = patch(api, f"{base(game_save)}/play-settings", {"authors_note": "Changed.", "temperature": 7})
    assert bad.status_code == 400 and "temperature" in bad.json()["error"]["details"]
    assert PlaySettings.objects.get(game_save=game_save).authors_note == "Rain."
    cleared = patch(api, f"{base(game_save)}/play-settings", {"temperature": None}).json()
    assert cleared["overrides"]["temperature"] is None and cleared["overrides"]["max_tokens"] == 50
    # The narrate endpoint (whole and streamed) sends them, with the note in the prompt.
    api.post(f"{base(game_save)}/narrate", {"player_input": "I wait"})
    sent = [r for r in narrator.server.requests if operation_of(r) == "narrate"][-1]
    assert sent["max_tokens"] == 50 and user_prompt(sent).rstrip().endswith("## Author's note\nRain.")
    api.post(f"{base(game_save)}/narrate", {"player_input": "I wait", "stream": True}).getvalue()
    assert [r for r in narrator.server.requests if operation_of(r) == "narrate"][-1]["max_tokens"] == 50
