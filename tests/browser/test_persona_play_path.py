"""A universe to play in two clicks, the persona and the Metadata page's known keys, pending links,
and an import that asks before merging by title, in a real browser (keyboard, phone width, axe)."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from studio.world.models import Save, UniverseMeta

pytestmark = pytest.mark.browser

LEGACY = "Ilya Voss, a young lighthouse-keeper's apprentice who can hear glass sing"


def test_from_the_overview_to_the_console_in_two_clicks(
    page, live_server, login, playtester, universe, axe, screenshot
):
    UniverseMeta.objects.create(universe=universe, key="player_character", value=LEGACY)
    login(page, playtester)
    page.goto(f"/universes/{universe.slug}/")
    expect(page.locator("#new-save")).to_contain_text("New save")
    expect(page.locator(".actions-bar")).to_contain_text("You play Ilya Voss.")  # the name, not the description
    page.click("#new-save")  # click 1
    expect(page.locator("#create-form [name=name]")).to_have_value(f"{universe.name} — play 1")
    expect(page.locator("#create-form")).to_contain_text("no model is connected")
    assert axe(page) == []
    screenshot("new-save-form")
    page.click("#create-form button[type=submit]")  # click 2
    expect(page).to_have_url(re.compile(r"/saves/[^/]+/$"))
    game_save = Save.objects.get(universe=universe)
    assert page.url.endswith(f"/saves/{game_save.save_id}/")
    # The first save wrote the old value's split back, as play read it.
    assert dict(universe.meta.values_list("key", "value"))["player_character"] == "Ilya Voss"
    assert page.console_errors == []


def test_persona_and_known_keys_by_keyboard_and_on_a_phone(
    page, phone_page, live_server, login, author, universe, axe, screenshot
):
    login(page, author)
    page.goto(f"/universes/{universe.slug}/meta/")
    assert axe(page) == []
    page.get_by_label("Name").fill("Ilya Voss")
    page.get_by_label("Description").fill("An apprentice who hears glass sing.")
    page.get_by_role("button", name="Save persona").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#persona [role=status]")).to_contain_text("Saved the persona “Ilya Voss”")
    # A known key's Set link opens the add form on that key; after saving, the form is empty again.
    page.get_by_role("link", name="Set tone").click()
    # The link is a full navigation: wait for it to load (htmx included) before submitting,
    # or the submit can beat htmx and post the plain form.
    page.wait_for_url(re.compile(r"/meta/\?key=tone"))
    page.wait_for_load_state()
    expect(page.locator("#meta-add [name=key]")).to_have_value("tone")
    page.locator("#meta-add [name=value]").fill("melancholy")
    page.locator("#meta-add button[type=submit]").click()
    expect(page.locator("#meta-table [role=status]")).to_contain_text("Saved “tone”")
    expect(page.locator("#meta-add [name=key]")).to_have_value("")
    expect(page.locator("#meta-add [name=value]")).to_have_value("")
    expect(page.locator("#meta-table .known-keys")).to_contain_text("melancholy")
    assert axe(page) == []
    screenshot("metadata-known-keys")
    assert page.console_errors == []

    login(phone_page, author)
    phone_page.goto(f"/universes/{universe.slug}/meta/")
    widths = phone_page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1], widths
    screenshot("metadata-phone", of=phone_page)


def test_pending_links_and_an_import_that_asks_before_merging(
    page, live_server, login, author, universe, axe, tmp_path, screenshot, monkeypatch
):
    from studio.universes import services

    monkeypatch.setattr(services.lore, "_sync_lore_now", lambda universe_pk: None)  # no embedding job here
    login(page, author)
    page.goto(f"/universes/{universe.slug}/lore/new/")
    page.fill("[name=new-title]", "The Glass Bell")
    page.select_option("[name=new-kind]", "item")  # no kind is preselected
    page.fill("[name=new-links]", "Ilya Voss")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("li.pending-link")).to_contain_text("Ilya Voss")
    page.goto(f"/universes/{universe.slug}/lore/health/")
    expect(page.locator("#health-pending")).to_contain_text("“Ilya Voss”")
    assert axe(page) == []
    page.locator("#health-pending a", has_text="write it").click()
    expect(page.locator("[name=new-title]")).to_have_value("Ilya Voss")
    page.select_option("[name=new-kind]", "character")
    page.get_by_role("button", name="Save", exact=True).click()
    page.goto(f"/universes/{universe.slug}/lore/the-glass-bell/")
    expect(page.locator("li.pending-link")).to_have_count(0)
    expect(page.get_by_role("link", name="Ilya Voss")).to_be_visible()

    world = tmp_path / "world.json"
    world.write_text(
        json.dumps(
            {"entries": {"0": {"uid": 0, "key": ["Vey"], "comment": "Port Vey", "content": "Rebuilt after the flood."}}}
        ),
        encoding="utf-8",
    )
    page.goto(f"/universes/{universe.slug}/exchange/")
    page.set_input_files("#import-panel input[name=file]", str(world))
    page.click("#import-panel button[type=submit]")
    expect(page.locator("#merge-heading")).to_contain_text("would merge 1 entry by title")
    assert axe(page) == []
    screenshot("import-merge-preview")
    page.get_by_role("button", name="Import them as new entries").click()
    expect(page.locator("#import-report")).to_be_visible()
    assert universe.lore_entries.filter(title="Port Vey").count() == 2
    assert universe.lore_entries.get(entry_id="port-vey").text == "A harbour town."
    assert page.console_errors == []
