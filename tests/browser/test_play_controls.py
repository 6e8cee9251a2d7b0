"""The Console's play controls in a real browser (issue 23): a card's opening, two swipes, a
continue, an undo and an edit of a past turn; Stop with the feedback while the model writes;
(the action box at phone width: test_story_view.py). The narratives come from the scripted OpenAI-compatible
server (tests/llm_server.py); nothing here is a model."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from studio.saves.models import NarratorDraft
from studio.world.models import Event
from tests.llm_server import Reply, operation_of, serve_as_studio_model

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FIRST = "Mira counts her silver and does not look up."
SECOND = "Fog hides the quay; somewhere a bell rings twice."
THIRD = "A gull lands on the ledger."
MORE = "Then she smiles."
SLOW = " ".join(["Waves"] + ["roll"] * 60) + "."


@pytest.fixture
def narrator_server(settings, eager, vector_memory):
    script = {"reply": Reply(content=FIRST, chunk_delay=0.02)}

    def respond(request):
        return script["reply"] if operation_of(request) == "narrate" else Reply(content="{}")

    with serve_as_studio_model(settings, respond, max_retries=0, timeout=10) as server:
        server.script = script
        yield server


@pytest.fixture
def carded_save(universe, author, eager, vector_memory, monkeypatch):
    from studio.saves.services import save_create
    from studio.universes import services
    from studio.universes.interchange import character_card
    from studio.world.models import UniverseMeta

    monkeypatch.setattr(services.lore, "_sync_lore_now", lambda universe_pk: None)
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Mira",
            "description": "A harbour clerk.",
            "first_mes": "Mira looks up at {{user}}.",
            "alternate_greetings": ["The ledger slams shut as {{user}} comes in.", "Rain. Mira does not look up."],
        },
    }
    services.card_import(
        universe=universe, user=author, book=character_card.parse_card(json.dumps(card).encode(), filename="mira.json")
    )
    UniverseMeta.objects.create(universe=universe, key="player_character", value="Wren")
    return save_create(universe=universe, name="Fresh")


def wait_done(page):
    expect(page.locator("#narration")).to_have_attribute("data-status", "done")


def test_opening_two_swipes_continue_undo_and_an_edit(logged_in_page, playtester, carded_save, narrator_server, axe):
    game_save = carded_save
    page = logged_in_page(playtester)
    page.goto(game_save.get_absolute_url())

    # The card's opening: three greetings to choose from, no model call.
    page.click("#opening-start")
    expect(page.locator("#draft-swipe-count")).to_have_text("1/3")
    page.click("#draft-next")
    expect(page.locator("#draft-swipe-count")).to_have_text("2/3")
    expect(page.locator("#narration")).to_contain_text("The ledger slams shut as Wren comes in.")
    assert axe(page) == []
    page.click("#narrator-accept button[type=submit]")
    expect(page.locator("#console-turns li[data-turn='1']")).to_contain_text("The ledger slams shut as Wren comes in.")

    # Turn 2, by keyboard: type the action, Enter sends it.
    page.focus("#narrate-input")
    page.keyboard.type("ask Mira about the ledger")
    page.keyboard.press("Enter")
    expect(page.locator("#narration")).to_contain_text("does not look up.")
    wait_done(page)
    assert (
        NarratorDraft.objects.get(game_save=game_save, status="open").player_input == "You ask Mira about the ledger."
    )

    # Two swipes: each keeps the others.
    narrator_server.script["reply"] = Reply(content=SECOND, chunk_delay=0.02)
    page.click("#narrator-regenerate")
    expect(page.locator("#narration")).to_contain_text("a bell rings twice")
    wait_done(page)
    narrator_server.script["reply"] = Reply(content=THIRD, chunk_delay=0.02)
    page.click("#narrator-regenerate")
    expect(page.locator("#narration")).to_contain_text("A gull lands")
    wait_done(page)
    page.click("#draft-previous")
    expect(page.locator("#draft-swipe-count")).to_have_text("2/3")
    expect(page.locator("#narration")).to_contain_text("a bell rings twice")

    # Continue: alternative 4 is alternative 2 and what the model adds.
    narrator_server.script["reply"] = Reply(content=MORE, chunk_delay=0.02)
    page.click("#narrator-continue")
    expect(page.locator("#narration")).to_contain_text(f"{SECOND} {MORE}")
    wait_done(page)
    assert axe(page) == []
    page.click("#narrator-accept button[type=submit]")
    expect(page.locator("#console-turns li[data-turn='2']")).to_contain_text(MORE)
    assert Event.objects.get(game_save=game_save, turn_id=2).narrative == f"{SECOND} {MORE}"

    # Undo: a rewind by one; the action goes back into the box, the turn can be put back.
    page.click("#turn-undo")
    expect(page.locator("#console-turns li[data-turn='2']")).to_have_count(0)
    expect(page.locator("#narrate-input")).to_have_value("You ask Mira about the ledger.")
    expect(page.locator("#narrate-input")).to_be_focused()
    expect(page.locator("#save-current-turn")).to_have_text("1")
    assert not Event.objects.filter(game_save=game_save, turn_id=2).exists()
    expect(page.locator("#set-aside")).to_contain_text("Put turn 2 back")

    # Edit turn 1 in place.
    page.click("#turn-edit-1 summary")
    page.fill("#turn-edit-text-1", "The ledger slams shut. Mira glares at Wren.")
    page.click("#turn-edit-1 button[type=submit]")
    expect(page.locator("#console-turns li[data-turn='1']")).to_contain_text("Mira glares at Wren.")
    expect(page.locator("#console")).to_contain_text("Turn 1 updated")
    assert Event.objects.get(game_save=game_save, turn_id=1).narrative == "The ledger slams shut. Mira glares at Wren."
    assert axe(page) == []


def test_stop_shows_the_time_and_leaves_the_text_editable(logged_in_page, playtester, game_save, narrator_server):
    narrator_server.script["reply"] = Reply(content=SLOW, chunk_delay=0.15)
    page = logged_in_page(playtester)
    page.goto(game_save.get_absolute_url())
    page.fill("#narrate-input", "watch the sea")
    page.click("#narrate-form button[type=submit]")
    expect(page.locator("[data-narrator-stats]")).to_contain_text("first text after")
    expect(page.locator("[data-narrator-stats]")).to_contain_text("tokens so far")
    expect(page.locator("[data-narrator-stats]")).to_contain_text("elapsed")
    page.click("#narrator-stop")
    expect(page.locator("#narration")).to_have_attribute("data-status", "cancelled")
    text = page.locator("#narrator-narrative").input_value()
    assert text.startswith("You watch the sea") is False and text.startswith("Waves") and len(text) < len(SLOW)
    assert Event.objects.filter(game_save=game_save).count() == 3  # never a half turn
    page.fill("#narrator-narrative", text + " The tide turns.")
    page.click("#narrator-accept button[type=submit]")
    expect(page.locator("#console-turns li[data-turn='4']")).to_contain_text("The tide turns.")
