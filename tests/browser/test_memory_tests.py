"""Real-browser test of the Tests page: an author writes a memory test (a refused one first: its error beside
the field), changes the kind, then runs the tests on the save and reads why the test failed."""

from __future__ import annotations

import pytest

from studio.saves.services import turn_append
from studio.universes.models import MemoryTest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def scene(living, no_runner, vector_memory):
    turn_append(
        game_save=living,
        player_input="a",
        narrative="Kael hides the ledger.",
        state={"present": ["Mira", "Kael"], "location": "dock"},
    )
    return living


def test_write_and_run_a_memory_test(logged_in_page, author, playtester, scene, screenshot):
    scene.universe.members.add(author)
    page = logged_in_page(author)
    page.goto(f"/universes/{scene.universe.slug}/")
    page.click("nav.tabs >> text=Tests")
    page.wait_for_selector("h1:has-text('Memory tests')")
    # The kind's fields come with the kind (htmx), the name typed so far stays.
    page.fill("#test-name", "mira-knows-the-ledger")
    page.select_option("#test-kind", "context")
    page.wait_for_selector("#test-action")
    assert page.input_value("#test-name") == "mira-knows-the-ledger"
    page.select_option("#test-kind", "knows")
    page.wait_for_selector("#test-character")
    # Refused: an entry the book does not have; the error sits beside its field and nothing is written.
    page.fill("#test-character", "Mira")
    page.fill("#test-entry", "the-ledger")
    page.click("#test-fields button[type=submit]")
    page.wait_for_selector("#test-entry-errors")
    assert "is not an entry_id" in page.inner_text("#test-entry-errors")
    assert not MemoryTest.objects.exists()
    page.fill("#test-entry", "ledger")
    page.click("#test-fields button[type=submit]")
    page.wait_for_selector("text=Added the test “mira-knows-the-ledger”.")
    assert "Mira knows the entry “ledger”" in page.inner_text(".memory-tests")
    # Run it on the save: it fails, and the records say why.
    page.select_option("#run-save", scene.save_id)
    page.click("text=Run the tests")
    row = page.locator("tr[data-result='mira-knows-the-ledger']")
    row.wait_for()
    assert row.get_attribute("data-verdict") == "fail"
    assert "secret (known by Kael)" in row.inner_text()
    row.locator("summary").click()
    assert "knowledge" in row.locator("details").inner_text()
    screenshot("memory-test-failed")
    assert not page.console_errors
