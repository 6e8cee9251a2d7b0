"""Real-browser tests of who knows what: the table at a turn (turn picker over htmx), presence
set with the picker on the timeline, a reveal added, and the Context viewer's point of view."""

from __future__ import annotations

import pytest

from studio.memory.facts import Fact, insert_facts
from studio.memory.knowledge.models import Presence, Reveal
from studio.saves.services import turn_append

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def scene(living, no_runner, vector_memory):
    turn_append(
        game_save=living,
        player_input="a",
        narrative="Kael hides the ledger.",
        state={"present": ["Mira", "Kael"], "location": "dock"},
    )
    insert_facts(living.save_id, 1, [Fact("Kael hid the ledger in the chapel.", entities=["Kael"])])
    turn_append(
        game_save=living, player_input="b", narrative="Ivo arrives.", state={"present": ["Ivo"], "location": "chapel"}
    )
    return living


def test_who_knows_what_presence_and_reveals(logged_in_page, playtester, scene, screenshot):
    page = logged_in_page(playtester)
    page.goto(f"/memory/{scene.save_id}/knowledge/?turn=2")
    fact_row = page.locator(".knowledge-facts tr[data-fact]").first
    assert "Kael hid the ledger" in fact_row.inner_text()
    assert "Ivo was not present at turn 1" in fact_row.inner_text()
    page.fill("input[name=turn]", "0")
    page.locator("input[name=turn]").first.dispatch_event("change")
    page.wait_for_selector("#knowledge-table[data-turn='0']")
    screenshot("knowledge-table")
    # Set presence with the timeline's picker (htmx): Ivo is now present at turn 1 and knows the fact.
    page.goto(f"/saves/{scene.save_id}/timeline/")
    picker = page.locator("#presence-1")
    picker.locator("summary").click()
    picker.locator("input[value='Ivo']").check()
    picker.locator("button[type=submit]").click()
    page.wait_for_selector(
        "#presence-1 > p:has-text('Ivo')"
    )  # the swapped line, not the picker's labels (no eval: the CSP)
    assert "Ivo" in Presence.objects.get(game_save=scene, turn_id=1).characters
    # Add a reveal from the page's form.
    page.goto(f"/memory/{scene.save_id}/knowledge/")
    page.select_option("#reveal-form select[name=target]", "entry:ledger")
    page.fill("#reveal-form input[name=character]", "Mira")
    page.fill("#reveal-form input[name=told_by]", "Kael")
    page.click("#reveal-form button[type=submit]")
    page.wait_for_selector("text=Reveal added.")
    assert Reveal.objects.get(game_save=scene).character == "Mira"
    cell = page.locator(".knowledge-secrets tr[data-entry='ledger']")
    assert "told to Mira by Kael at turn 2" in cell.inner_text()
    page.goto(f"/memory/{scene.save_id}/knowledge/character/Mira/")
    assert "learned at turn 2 from Kael" in page.locator(".knowledge-timeline").inner_text()
    assert not page.console_errors


def test_context_viewer_point_of_view(logged_in_page, playtester, scene):
    page = logged_in_page(playtester)
    page.goto(f"/memory/{scene.save_id}/context/?q=the+ledger&pov=Ivo")
    section = page.locator("#pov-section")
    assert "Ivo" in section.inner_text()
    assert "secret (known by Kael)" in page.locator("#pov-explain").inner_text()  # the ledger, activated by its key
    assert page.locator(".badge", has_text="narrator-only").count() >= 1
    assert not page.console_errors
