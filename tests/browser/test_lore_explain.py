"""Real-browser test of the Context viewer's explain panel: every Lore Book entry, in or out, and why."""

from __future__ import annotations

import pytest

from tests.plugins.demo import QUESTION

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_explain_panel_says_why_each_entry_is_in_or_out(page, login, playtester, demo):
    failures: list[str] = []
    page.on("pageerror", lambda exc: failures.append(str(exc)))
    demo.universe.members.add(playtester)
    login(page, playtester)
    page.goto(f"/memory/{demo.save_id}/context/")
    page.fill("#id_q", QUESTION)
    page.click("#context-form button[type=submit]")
    page.wait_for_selector("#lore-explain")
    rows = page.locator("#lore-explain tbody tr")
    assert rows.count() == demo.universe.lore_entries.count()
    hesper = page.locator("#lore-explain tr[data-entry-id='hesper-vale']")
    assert hesper.get_attribute("data-included") == "yes", hesper.inner_text()
    assert "matched key “Hesper” in the pending input" in hesper.inner_text()
    hood = page.locator("#lore-explain tr[data-entry-id='copper-hood']")
    # Found by meaning and in, though the recent turns and the lore they activate share the budget:
    # part of it is kept for what the action recalls.
    assert "found by meaning at rank" in hood.inner_text(), hood.inner_text()
    assert hood.get_attribute("data-included") == "yes", hood.inner_text()
    out = page.locator("#lore-explain tr[data-included='no']")
    assert out.count() >= 1 and out.first.locator("td").nth(2).inner_text().strip()  # an out entry says why
    # The htmx swap kept the page (the panel came with the fragment) and pushed the query to the URL.
    assert "q=" in page.url and page.locator("h1").count() >= 1
    assert not failures
