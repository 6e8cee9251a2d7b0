"""The narrator in a real browser: the narrative streams into the Console, then the
playtester regenerates, chooses, edits and accepts, or discards. The narratives come from
the scripted OpenAI-compatible server (tests/llm_server.py); nothing here is a model."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from studio.saves.models import Event, NarratorSnapshot
from tests.llm_server import Reply, ScriptedLLMServer, operation_of

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FIRST = "Rain drums on the harbour roofs while Mira counts her silver and does not look up at you yet."
SECOND = "Fog hides the quay; somewhere a bell rings twice."


@pytest.fixture
def narrator_server(settings, eager, vector_memory):
    script = {"reply": Reply(content=FIRST, chunk_delay=0.15)}
    server = ScriptedLLMServer(lambda request: script["reply"] if operation_of(request) == "narrate" else Reply(content="{}")).start()
    settings.AXIOM_LLM_BASE_URL = server.base_url
    settings.AXIOM_LLM_MODEL = "test-model"
    settings.AXIOM_LLM_MAX_RETRIES = 0
    settings.AXIOM_LLM_TIMEOUT = 10
    server.script = script
    yield server
    server.stop()


def test_narrate_stream_regenerate_choose_edit_accept_then_discard(logged_in_page, playtester, game_save, narrator_server):
    page = logged_in_page(playtester)
    page.goto(game_save.get_absolute_url())
    page.fill("#narrate-input", "I ask Mira what she knows")
    page.click("#narrate-form button[type=submit]")
    # The text arrives while the narrator is still writing (streamed, not swapped in at the end).
    streaming = page.locator("[data-narrator-text]")
    expect(streaming).not_to_be_empty()
    assert page.locator("#narrator-working").is_visible()
    expect(page.locator("#narrator-accept button[type=submit]")).to_be_visible()
    expect(page.locator("#narration")).to_contain_text("does not look up at you yet.")
    assert Event.objects.filter(game_save=game_save).count() == 3  # nothing appended yet

    narrator_server.script["reply"] = Reply(content=SECOND, chunk_delay=0.05)
    page.click("#narrator-regenerate")
    expect(page.locator("#narration")).to_contain_text("a bell rings twice")
    # The regenerated narration has ended and its final panel is in (the choice below must not
    # race the stream's own refresh of the panel).
    expect(page.locator("#narration")).to_have_attribute("data-status", "done")
    page.get_by_role("button", name="Alternative 1").click()
    expect(page.locator("#narration")).to_contain_text("Rain drums on the harbour roofs")

    page.click("#narrator-edit summary")
    page.fill("#narrator-narrative", FIRST + " She closes the ledger.")
    page.click("#narrator-accept button[type=submit]")
    expect(page.locator("#console-turns li[data-turn='4']")).to_contain_text("She closes the ledger.")
    event = Event.objects.get(game_save=game_save, turn_id=4)
    # The Console's default input mode is Do: the action is sent as "You ...".
    assert event.narrative.endswith("She closes the ledger.") and event.player_input == "You ask Mira what she knows."
    snapshot = NarratorSnapshot.objects.get(game_save=game_save, turn_id=4)
    assert snapshot.edited and snapshot.alternatives == 2 and snapshot.proposed == FIRST

    # Discard: the next narration goes, nothing is appended.
    narrator_server.script["reply"] = Reply(content=SECOND)
    page.fill("#narrate-input", "I leave")
    page.click("#narrate-form button[type=submit]")
    expect(page.locator("#narrator-accept button[type=submit]")).to_be_visible()
    page.click("#narrator-discard")
    expect(page.locator("#narrator")).to_contain_text("Draft discarded; nothing was appended.")
    assert Event.objects.filter(game_save=game_save).count() == 4

    # What the narrator saw, from the timeline.
    page.goto(f"/saves/{game_save.save_id}/timeline/")
    page.get_by_role("link", name="What the narrator saw at turn 4").click()
    expect(page.locator("main, body").first).to_contain_text("test-model")
