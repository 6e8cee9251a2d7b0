"""The key tester in a real browser: live results as the author types, on its page and the Lore Book's."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from studio.world.models import LoreEntry

pytestmark = pytest.mark.browser


@pytest.fixture
def book(universe):
    LoreEntry.objects.filter(entry_id="kael").update(keys=["Kael", "the smuggler"])
    LoreEntry.objects.filter(entry_id="port-vey").update(keys=["Port Vey"], text="A harbour town where Kael hides.")
    LoreEntry.objects.create(
        universe=universe,
        entry_id="hesper",
        title="Hesper Vale",
        keys=["Hesper"],
        secondary_keys=["Copper Hood"],
        text="An informant.",
    )
    LoreEntry.objects.create(universe=universe, entry_id="rules", title="House rules", constant=True, text="Be fair.")
    return universe


def included(page):
    return page.locator("#tester-included li")


def test_key_tester_updates_as_the_author_types(page, live_server, login, author, book, screenshot):
    login(page, author)
    page.goto(f"{live_server.url}/universes/{book.slug}/lore/")
    page.click("nav.lore-tabs >> text=Key tester")
    expect(page.locator("h1")).to_have_text("Key tester")
    box = page.locator("#tester-text")
    box.press_sequentially("ask Hesper about the weather", delay=10)  # real input events, no submit
    expect(page.locator("#tester-excluded [data-entry=hesper]")).to_contain_text("secondary logic AND ANY failed")
    expect(included(page)).to_have_count(1)  # the constant entry only
    box.press_sequentially(" and the Copper Hood at Port Vey", delay=10)
    expect(page.locator("#tester-included [data-entry=hesper]")).to_contain_text("matched key “Hesper”")
    expect(page.locator("#tester-included [data-entry=kael]")).to_contain_text("recursion")
    expect(page.locator("#tester-included [data-entry=rules]")).to_contain_text("constant")
    assert "/lore/tester/" in page.url  # updated in place, not by a page load
    screenshot("key-tester")
    errors = [e for e in page.console_errors if "favicon.ico" not in e]
    assert errors == [], "\n".join(errors)


def test_key_tester_on_the_lore_book_page(page, live_server, login, author, book):
    login(page, author)
    page.goto(f"{live_server.url}/universes/{book.slug}/lore/")
    page.click("#lore-tester-box summary")
    page.locator("#lore-tester-box #tester-text").press_sequentially("Kael", delay=10)
    expect(page.locator("#lore-tester-box #tester-included [data-entry=kael]")).to_contain_text("matched key “Kael”")
    assert page.url.endswith("/lore/")


def test_key_tester_works_without_javascript(browser, live_server, login, author, book):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.console_errors = []
    login(page, author)
    page.goto(f"{live_server.url}/universes/{book.slug}/lore/tester/")
    page.fill("#tester-text", "Kael")
    page.click("#lore-tester button[type=submit]")
    expect(page.locator("#tester-included [data-entry=kael]")).to_be_visible()
    # The text travels in the POST body (up to 20,000 characters do not fit in a URL).
    assert page.url.endswith("/lore/tester/") and "text=" not in page.url
    context.close()
