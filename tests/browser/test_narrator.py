"""The narrator in a real browser: the narrative streams into the Console, then the
playtester regenerates, chooses, edits and accepts, or discards. The narratives come from
the scripted OpenAI-compatible server (tests/llm_server.py); nothing here is a model."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from studio.saves.models import NarratorSnapshot
from studio.world.models import Event
from tests.llm_server import Reply, ScriptedLLMServer, operation_of

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FIRST = "Rain drums on the harbour roofs while Mira counts her silver and does not look up at you yet."
SECOND = "Fog hides the quay; somewhere a bell rings twice."


@pytest.fixture
def narrator_server(settings, eager, vector_memory):
    script = {"reply": Reply(content=FIRST, chunk_delay=0.15)}
    server = ScriptedLLMServer(
        lambda request: script["reply"] if operation_of(request) == "narrate" else Reply(content="{}")
    ).start()
    settings.AXIOM_LLM_BASE_URL = server.base_url
    settings.AXIOM_LLM_MODEL = "test-model"
    settings.AXIOM_LLM_MAX_RETRIES = 0
    settings.AXIOM_LLM_TIMEOUT = 10
    server.script = script
    yield server
    server.stop()


def test_narrate_stream_regenerate_choose_edit_accept_then_discard(
    logged_in_page, playtester, game_save, narrator_server
):
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
    expect(page.locator("#draft-swipe-count")).to_have_text("2/2")
    page.click("#draft-previous")
    expect(page.locator("#draft-swipe-count")).to_have_text("1/2")
    expect(page.locator("#narration")).to_contain_text("Rain drums on the harbour roofs")
    expect(page.locator("#draft-next")).to_be_focused()  # the arrow used keeps the focus (← was disabled)

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
    expect(page.locator("#play-status")).to_contain_text("Draft for turn 5 discarded; nothing was appended.")
    expect(page.locator("#set-aside")).to_contain_text("Bring it back")
    assert Event.objects.filter(game_save=game_save).count() == 4

    # What the narrator saw, from the timeline.
    page.goto(f"/saves/{game_save.save_id}/timeline/")
    page.get_by_role("link", name="What the narrator saw at turn 4").click()
    expect(page.locator("main, body").first).to_contain_text("test-model")


def test_the_snapshot_page_marks_what_is_new_since_the_previous_prompt(logged_in_page, playtester, game_save, axe):
    shared = "## Recent turns\nTurn 1\n> look\nRain on the quay.\n\n"
    new = "Turn 2\n> wait\nFog.\n\n## The player's action\nwait"
    for turn_id, user in ((1, shared + "## The player's action\nlook"), (2, shared + new)):
        NarratorSnapshot.objects.create(
            game_save=game_save, turn_id=turn_id, system_prompt="You narrate.", user_prompt=user
        )
    page = logged_in_page(playtester)
    page.goto(reverse("saves:narrator_snapshot", args=[game_save.save_id, 2]))
    expect(page.locator("#snapshot-prefix-share")).to_contain_text("Shared with turn 1's prompt:")
    page.locator("#snapshot-prompt summary").click()
    mark = page.locator("#prompt-new")
    expect(mark).to_be_visible()
    expect(mark).to_have_text(new)  # the label is generated content, not part of the prompt's text
    assert mark.evaluate("el => getComputedStyle(el, '::before').content") == '"new since turn 1"'
    assert axe(page) == []
    page.get_by_role("link", name="go to it").click()
    expect(page).to_have_url(re.compile(r"#prompt-new$"))
    page.get_by_role("link", name="context_cap_recall on the universe's Metadata page").click()
    expect(page).to_have_url(re.compile(r"/meta/\?key=context_cap_recall#meta-add$"))
