"""The story view in a real browser (issue 30): a story played with the keyboard only, swipes that
browse alternatives without losing a turn, an undone turn put back, and the action box in the
first screen of a phone on a long save. Narratives come from the scripted OpenAI-compatible server
(tests/llm_server.py); nothing here is a model."""

from __future__ import annotations

import itertools

import pytest
from playwright.sync_api import expect

from studio.saves.models import AlternativeStatus, DraftStatus, NarratorAlternative, NarratorDraft
from studio.world.models import Event
from tests.browser.pages import ARTIFACTS
from tests.llm_server import Reply, operation_of, serve_as_studio_model

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def narrator_server(settings, eager, vector_memory):
    counter = itertools.count(1)

    def respond(request):
        if operation_of(request) != "narrate":
            return Reply(content="{}")
        return Reply(content=f"Narration {next(counter)}: the tide comes in over the quay.", chunk_delay=0.01)

    with serve_as_studio_model(settings, respond, max_retries=0, timeout=10) as server:
        yield server


@pytest.fixture
def fresh_save(universe, eager, vector_memory, monkeypatch):
    from studio.saves.services import save_create
    from studio.universes import services

    monkeypatch.setattr(services.lore, "_sync_lore_now", lambda universe_pk: None)
    return save_create(universe=universe, name="Keyboard story")


def focused_id(page) -> str:
    return page.evaluate("document.activeElement && document.activeElement.id")


def tab_to(page, element_id: str, *, backwards: bool = True, limit: int = 25) -> None:
    """Press (Shift+)Tab until `element_id` has the focus: how a keyboard user reaches a control."""
    for _ in range(limit):
        if focused_id(page) == element_id:
            return
        page.keyboard.press("Shift+Tab" if backwards else "Tab")
    raise AssertionError(f"#{element_id} was not reached with the keyboard (focus on #{focused_id(page)})")


def wait_done(page, turn=None):
    if turn is not None:  # the draft of that turn, not the one the page showed before the answer came
        expect(page.locator("#narrator-title")).to_contain_text(f"Turn {turn} ")
    expect(page.locator("#narration")).to_have_attribute("data-status", "done")


def test_a_story_of_six_turns_played_with_the_keyboard_only(
    logged_in_page, playtester, fresh_save, narrator_server, axe, screenshot
):
    page = logged_in_page(playtester)
    page.goto(fresh_save.get_absolute_url())
    expect(page.locator("#narrate-input")).to_be_focused()  # the page opens in the action box
    for turn in range(1, 7):
        page.keyboard.type(f"look at wave {turn}")
        page.keyboard.press("Enter")  # sends (and accepts the narration above it)
        wait_done(page, turn)
        expect(page.locator("#narrate-input")).to_be_focused()
        expect(page.locator("#narrate-input")).to_have_value("")
        expect(page.locator("#save-current-turn")).to_have_text(str(turn - 1))
        if turn == 3:  # a control of the draft, reached and pressed by keyboard: focus comes back
            tab_to(page, "narrator-regenerate")
            page.keyboard.press("Enter")
            wait_done(page)
            expect(page.locator("#draft-swipe-count")).to_have_text("2/2")
            expect(page.locator("#narrate-input")).to_be_focused()
    page.keyboard.press("Shift+Enter")  # a line break, not a send
    expect(page.locator("#narrate-input")).to_have_value("\n")
    page.keyboard.press("Backspace")
    page.keyboard.press("Enter")  # an empty box accepts the last narration
    expect(page.locator("#console-turns li[data-turn='6']")).to_be_visible()
    expect(page.locator("#save-current-turn")).to_have_text("6")
    expect(page.locator("#narrate-input")).to_be_focused()
    events = list(Event.objects.filter(game_save=fresh_save).order_by("turn_id"))
    assert [e.player_input for e in events] == [f"You look at wave {n}." for n in range(1, 7)]
    assert "Narration 4" in events[2].narrative  # turn 3 is the regenerated alternative
    assert axe(page) == []
    screenshot("story-view")

    # Undo and put back, by keyboard: the header follows, the focus comes back each time.
    tab_to(page, "turn-undo")
    page.keyboard.press("Enter")
    expect(page.locator("#save-current-turn")).to_have_text("5")
    expect(page.locator("#narrate-input")).to_be_focused()
    expect(page.locator("#narrate-input")).to_have_value("You look at wave 6.")
    undone = NarratorDraft.objects.get(game_save=fresh_save, status=DraftStatus.UNDONE)
    tab_to(page, f"put-back-{undone.pk}")
    page.keyboard.press("Enter")
    expect(page.locator("#save-current-turn")).to_have_text("6")
    expect(page.locator("#narrate-input")).to_be_focused()
    assert Event.objects.get(game_save=fresh_save, turn_id=6).narrative == events[5].narrative


def accepted_with_three(game_save) -> list[str]:
    """Turn 4 of the save, narrated three times and accepted with the first (made as the services leave it)."""
    texts = ["The tide is in.", "The tide is out.", "There is no tide tonight."]
    draft = NarratorDraft.objects.create(
        game_save=game_save, turn_id=4, player_input="You wait.", status=DraftStatus.ACCEPTED, chosen_number=1
    )
    for number, text in enumerate(texts, start=1):
        NarratorAlternative.objects.create(draft=draft, number=number, status=AlternativeStatus.DONE, text=text)
    Event.objects.create(game_save=game_save, turn_id=4, player_input="You wait.", narrative=texts[0])
    game_save.current_turn = 4
    game_save.save()
    return texts


def test_swipe_arrows_browse_three_alternatives_and_back_without_losing_a_turn(
    logged_in_page, playtester, game_save, narrator_server, axe
):
    texts = accepted_with_three(game_save)
    page = logged_in_page(playtester)
    page.goto(game_save.get_absolute_url())
    last = page.locator("#console-turns li[data-turn='4'] .prose")
    expect(page.locator("#swipe-count")).to_have_text("1/3")
    expect(page.locator("#swipe-previous")).to_be_disabled()
    for arrow, count, text in (("next", "2/3", 1), ("next", "3/3", 2), ("previous", "2/3", 1), ("previous", "1/3", 0)):
        page.click(f"#swipe-{arrow}")
        expect(page.locator("#swipe-count")).to_have_text(count)
        expect(last).to_have_text(texts[text])
        expect(page.locator("#save-current-turn")).to_have_text("4")
        assert Event.objects.filter(game_save=game_save).count() == 4  # never a rewind
        assert Event.objects.get(game_save=game_save, turn_id=4).narrative == texts[text]
    # The arrow keeps the focus while it can be pressed again; at the end it passes to the other one.
    page.focus("#swipe-next")
    page.keyboard.press("Enter")
    expect(page.locator("#swipe-count")).to_have_text("2/3")
    expect(page.locator("#swipe-next")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#swipe-count")).to_have_text("3/3")
    expect(page.locator("#swipe-previous")).to_be_focused()
    assert axe(page) == []


def test_an_undone_turn_is_put_back(logged_in_page, playtester, game_save, narrator_server):
    texts = accepted_with_three(game_save)
    page = logged_in_page(playtester)
    page.goto(game_save.get_absolute_url())
    page.click("#swipe-next")
    expect(page.locator("#swipe-count")).to_have_text("2/3")
    page.click("#turn-undo")
    expect(page.locator("#console-turns li[data-turn='4']")).to_have_count(0)
    expect(page.locator("#play-status")).to_contain_text("Turn 4 undone")
    expect(page.locator("#narrate-input")).to_have_value("You wait.")
    page.get_by_role("button", name="Put turn 4 back").click()
    expect(page.locator("#console-turns li[data-turn='4'] .prose")).to_have_text(texts[1])
    expect(page.locator("#play-status")).to_contain_text("Turn 4 is back")
    expect(page.locator("#swipe-count")).to_have_text("2/3")  # its alternatives came back with it
    expect(page.locator("#save-current-turn")).to_have_text("4")


def test_at_phone_width_the_action_box_is_in_the_first_screen_of_a_long_save(
    phone_page, login, playtester, game_save, narrator_server, axe
):
    for turn in range(4, 21):
        Event.objects.create(
            game_save=game_save,
            turn_id=turn,
            player_input=f"input {turn}",
            narrative=("A long turn of rain and talk. " * 30).strip(),
        )
    game_save.current_turn = 20
    game_save.save()
    login(phone_page, playtester)
    phone_page.goto(game_save.get_absolute_url())
    expect(phone_page.locator("#narrate-input")).to_be_focused()
    assert phone_page.evaluate("window.scrollY") > 0  # it opens at the end of the story
    phone_page.screenshot(
        path=str(ARTIFACTS / "story-view-phone-first-screen.png")
    )  # the first screen, as a player sees it
    for scrolled in ("as it opens", "scrolled to the top"):
        box = phone_page.locator("#narrate-input").bounding_box()
        assert 0 <= box["y"] and box["y"] + box["height"] <= 844, (scrolled, box)
        phone_page.evaluate("window.scrollTo(0, 0)")
    expect(phone_page.locator("#console-turns li[data-turn='20']")).to_be_attached()
    assert phone_page.evaluate("document.documentElement.scrollWidth") <= 390
    tabs = phone_page.locator("nav.tabs .tab-groups").bounding_box()
    assert tabs["height"] < 60  # the four groups fit one row
    assert axe(phone_page) == []


def test_an_opening_chosen_from_alternate_greetings_on_a_universe_without_a_card(
    logged_in_page, author, universe, axe, settings
):
    from django.contrib.auth.models import Group

    from studio.roles import PLAYTESTERS
    from studio.world.models import Save

    settings.AXIOM_LLM_BASE_URL = ""  # the opening needs no model
    author.groups.add(Group.objects.get_or_create(name=PLAYTESTERS)[0])
    assert not universe.meta.filter(key="character_card").exists()
    page = logged_in_page(author)
    page.goto(f"/universes/{universe.slug}/meta/")
    page.fill("#opening-form textarea[name=first_message]", "Rain on the quay. {{user}} waits for the ferry.")
    page.fill(
        "#opening-form textarea[name=alternate_greetings]",
        "The ledger slams shut.\n---\nA bell rings twice across the water.",
    )
    page.click("#opening-form button[type=submit]")
    expect(page.locator("#opening")).to_contain_text("Saved the opening: the first message and 2 alternate greetings.")

    page.goto(f"/saves/new/?universe={universe.slug}")
    options = page.locator("#create-opening .opening-option")
    expect(options).to_have_count(4)
    expect(options.nth(3)).to_contain_text("A bell rings twice across the water.")
    assert axe(page) == []
    options.nth(3).locator("input").check()
    page.click("#create-submit")
    page.wait_for_url(lambda url: "/saves/new/" not in url)
    game_save = Save.objects.get(universe=universe)
    expect(page.locator("#console-turns li[data-turn='1'] .prose")).to_have_text("A bell rings twice across the water.")
    expect(page.locator("#save-current-turn")).to_have_text("1")
    assert game_save.current_turn == 1


def test_focus_is_never_left_on_the_page_after_presence_a_rewind_and_an_inline_lore_entry(
    logged_in_page, playtester, played, monkeypatch
):
    from studio.universes import services

    monkeypatch.setattr(services.lore, "_sync_lore_now", lambda universe_pk: None)

    def focused_tag(page) -> str:
        return page.evaluate("document.activeElement ? document.activeElement.tagName : ''")

    page = logged_in_page(playtester)
    page.goto(played.get_absolute_url())
    page.click("#drawer-presence > summary")
    page.click("#drawer-presence .presence-picker > summary")
    page.locator("#drawer-presence input[name=present]").first.check()
    page.locator("#drawer-presence button[type=submit]").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#drawer-presence .presence")).to_contain_text("Set by hand")
    page.wait_for_function("document.activeElement && document.activeElement !== document.body")

    page.goto(f"/saves/{played.save_id}/rewind/")
    page.fill("#id_turn", "2")
    page.click("#rewind-pick button[type=submit]")
    page.check("#rewind-confirm input[name=confirm]")
    page.locator("#rewind-confirm button[type=submit]").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#rewind-summary")).to_be_focused()  # the rewind's result, said where the focus is

    from django.contrib.auth.models import Group

    from studio.roles import AUTHORS

    playtester.groups.add(Group.objects.get_or_create(name=AUTHORS)[0])
    page.goto(f"/universes/{played.universe.slug}/lore/")
    page.get_by_text("Add an entry").click()
    page.fill("#lore-create input[name=new-title]", "Lantern Row")
    page.select_option("#lore-create select[name=new-kind]", "place")
    page.locator("#lore-create button[type=submit]").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#lore-rows")).to_contain_text("Lantern Row")
    expect(page.locator("#lore-create input[name=new-title]")).to_be_focused()  # ready for the next entry
    assert focused_tag(page) == "INPUT"
