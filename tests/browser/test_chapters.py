"""Chapters in a real browser: the Console's Close chapter button (its answer, its refusal when
the save moved, no summary without a model) and the chapter bands on the Timeline, each a link
to its chapter; axe on both pages. No model is connected here: nothing is summarised."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from studio.memory.chapters.models import Chapter

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_close_a_chapter_on_the_console_then_follow_its_band_on_the_timeline(
    logged_in_page, playtester, played, settings, axe, screenshot
):
    from studio.saves.services import turn_append

    settings.AXIOM_LLM_BASE_URL = ""
    page = logged_in_page(playtester)
    page.goto(played.get_absolute_url())
    card = page.locator("#console-chapter")
    expect(card).to_contain_text("The open chapter runs from turn 1 to turn 3.")
    expect(page.locator("#chapter-close")).to_have_text("Close chapter 1 at turn 3")

    # Another tab appends turn 4 meanwhile: this page's button (turn 3) closes nothing and says why.
    turn_append(game_save=played, player_input="wait", narrative="The storm passes over Port Vey.")
    page.click("#chapter-close")
    expect(page.locator("#chapter-close-result[role=alert]")).to_contain_text(
        "The save is at turn 4 now, not turn 3 as this page showed: no chapter was closed."
    )
    assert not Chapter.objects.filter(game_save=played).exists()
    expect(page.locator("#chapter-close")).to_have_text("Close chapter 1 at turn 4")
    assert axe(page, "#console-chapter") == []

    page.click("#chapter-close")
    expect(page.locator("#chapter-close-result[role=status]")).to_have_text(
        "Chapter 1 (turns 1–4) closed at turn 4; no summary will be made: no model is connected (AXIOM_LLM_BASE_URL)."
    )
    expect(card.get_by_role("heading")).to_have_text("Chapter 2")
    expect(page.locator("#chapter-close")).to_be_disabled()  # the open chapter has no turns yet
    assert axe(page) == []
    screenshot("console-closed")
    chapter = Chapter.objects.get(game_save=played)
    assert (chapter.first_turn, chapter.last_turn, chapter.summary_status) == (1, 4, "no_model")

    page.goto(f"/saves/{played.save_id}/timeline/")
    expect(page.locator("#timeline-chapters-text")).to_contain_text("Turns 1–4: 1 closed chapter;")
    band = page.get_by_role("link", name="Chapter turns 1–4: No summary made: no model configured")
    expect(band).to_be_visible()
    assert axe(page) == []
    screenshot("timeline-bands")
    band.click()
    page.wait_for_url(re.compile(rf"/saves/{played.save_id}/chapters/#chapter-{chapter.pk}$"))
    expect(page.locator(f"#chapter-{chapter.pk}")).to_contain_text("No summary was made: no model is configured")
