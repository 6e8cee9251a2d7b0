"""The authoring studio in a real browser: universes, Lore Book, missions, TOML and card import."""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

import pytest
from PIL import Image
from PIL.PngImagePlugin import PngInfo
from playwright.sync_api import expect

from studio.universes import services
from studio.universes.interchange import card_png
from studio.world.models import EmbeddingState, LoreEntry, Universe

pytestmark = pytest.mark.browser


@pytest.fixture
def queued(monkeypatch):
    """Record sync_lore enqueues instead of starting real embedding jobs."""
    calls: list[int] = []
    monkeypatch.setattr(services.lore, "_sync_lore_now", lambda universe_pk: calls.append(universe_pk))
    return calls


def no_console_errors(page, allow: tuple[str, ...] = ()):
    """No script error and no CSP violation on any page the test visited (a missing favicon aside)."""
    errors = [
        e
        for e in page.console_errors
        if "favicon.ico" not in e
        # No CSP exception: base.html's htmx-config settles only class/width/height, so htmx
        # never copies a style attribute that the self-only policy would block.
        and not any(a in e for a in allow)
    ]
    assert errors == [], "\n".join(errors)


def test_create_universe_add_and_inline_edit_lore_then_bulk_kind(page, live_server, login, author, screenshot, queued):
    login(page, author)
    page.goto("/universes/")
    page.fill("#universe-create input[name=name]", "Salt Coast")
    page.fill("#universe-create textarea[name=description]", "Smugglers & salt.")
    page.click("#universe-create button[type=submit]")
    # A new universe opens on its overview.
    page.wait_for_url(re.compile(r"/universes/salt-coast/$"))
    expect(page.locator(".messages")).to_contain_text("Created “Salt Coast”")
    screenshot("universe-created")
    universe = Universe.objects.get(name="Salt Coast")
    assert universe.owner == author

    page.click("nav.tabs >> text=Lore Book")
    expect(page.locator("h1")).to_have_text("Lore Book")
    screenshot("lore-empty")
    page.click("details summary")
    page.fill("#lore-create input[name=new-title]", "Kaël")
    page.select_option("#lore-create select[name=new-kind]", "character")
    page.fill("#lore-create textarea[name=new-text]", "Kaël is a smuggler of salt.")
    page.click("#lore-create button[type=submit]")
    expect(page.locator("#lore-rows")).to_contain_text("Kaël")
    page.fill("#lore-create input[name=new-title]", "Port Vey")
    page.select_option("#lore-create select[name=new-kind]", "character")  # wrong on purpose; bulk-fixed below
    page.fill("#lore-create textarea[name=new-text]", "A harbour town.")
    page.fill("#lore-create textarea[name=new-links]", "Kaël")
    page.click("#lore-create button[type=submit]")
    expect(page.locator("#lore-rows tr")).to_have_count(2)
    expect(page.locator("#lore-totals")).to_contain_text("2 entries")
    assert queued, "each edit queues sync_lore on commit"

    # Inline edit: the row turns into a form and back, without leaving the page.
    kael_row = page.locator("#lore-rows tr", has_text="Kaël is").first
    kael_row = page.locator(f"#lore-row-{LoreEntry.objects.get(entry_id='kael').pk}")
    kael_row.locator("text=Edit").click()
    editing = page.locator("tr.editing")
    editing.locator("textarea[name=text]").fill("Kaël smuggles salt past the harbour guard.")
    screenshot("inline-edit")
    editing.locator("button", has_text="Save").click()
    expect(page.locator("tr.editing")).to_have_count(0)
    expect(kael_row).to_contain_text("Pending")
    assert LoreEntry.objects.get(entry_id="kael").text == "Kaël smuggles salt past the harbour guard."
    assert "/edit/" not in page.url and "/lore/" in page.url  # edited in place

    # The embedding job finishing shows up live; the poller then stops.
    LoreEntry.objects.filter(universe=universe).update(embedding_state=EmbeddingState.EMBEDDED)
    expect(kael_row.locator(".badge.embedded")).to_have_text("Embedded", timeout=10_000)
    expect(page.locator("#embedding-poller")).to_contain_text("settled", timeout=10_000)

    # Bulk: select all (a static script), change both kinds to place at once.
    page.check("input[data-select-all]")
    page.select_option("#bulk-form select[name=new_kind]", "place")
    page.click("#bulk-form button[value=kind]")
    expect(page.locator("#lore-results")).to_contain_text("Changed 2 entries to Place")
    assert set(universe.lore_entries.values_list("kind", flat=True)) == {"place"}
    screenshot("bulk-kind")

    # Links chosen by title show as backlinks on the target.
    page.goto(f"/universes/{universe.slug}/lore/kael/")
    expect(page.locator("section", has_text="Backlinks")).to_contain_text("Port Vey")
    no_console_errors(page)


def test_missions_table_and_text_stay_in_step(page, live_server, login, author, universe, screenshot):
    login(page, author)
    page.goto(f"/universes/{universe.slug}/missions/")
    expect(page.locator("#character-names option[value='Kaël']")).to_have_count(1)
    page.fill(
        "form[action$='/missions/universe/'] textarea[name=mission]", "Everyone remembers who paid and who did not."
    )
    page.click("text=Save universe mission")
    expect(page.locator("#missions-panel .note")).to_contain_text("Saved the universe mission")

    page.locator("input[name=name]").nth(0).fill("Kaël")
    page.locator(".missions-table textarea[name=mission]").nth(0).fill("Remembers every debt: owed or owing.")
    page.click("text=Save table")
    expect(page.locator("textarea[name=text]")).to_have_value("Kaël: Remembers every debt: owed or owing.")

    page.fill("textarea[name=text]", "Kaël: Remembers every debt.\nMira: Remembers prices.")
    page.click("text=Save text")
    expect(page.locator("input[name=name]").nth(1)).to_have_value("Mira")
    expect(page.locator(".missions-table textarea[name=mission]").nth(1)).to_have_value("Remembers prices.")
    screenshot("missions")
    from studio.memory.missions import get_belief_missions, get_universe_mission

    assert get_belief_missions(universe) == {"Kaël": "Remembers every debt.", "Mira": "Remembers prices."}
    assert get_universe_mission(universe) == "Everyone remembers who paid and who did not."
    no_console_errors(page)


def test_toml_export_edit_and_reimport_with_diff(
    page, live_server, login, author, universe, screenshot, tmp_path, queued
):
    login(page, author)
    page.goto(f"/universes/{universe.slug}/exchange/")
    with page.expect_download() as download_info:
        page.click("text=Universe-as-Code (.toml)")
    path = tmp_path / "world.toml"
    download_info.value.save_as(path)
    original = path.read_text(encoding="utf-8")
    assert 'entry_id = "kael"' in original
    path.write_text(original.replace("A harbour town.", "A harbour town, burnt in the war."), encoding="utf-8")

    page.set_input_files("input[name=file][accept], form[action$='/universes/import/'] input[name=file]", str(path))
    page.click("text=Preview import")
    expect(page.locator("h1")).to_contain_text("Review the import")
    expect(page.locator(".diff")).to_contain_text("burnt in the war")
    screenshot("toml-diff")
    assert universe.lore_entries.get(entry_id="port-vey").text == "A harbour town."  # nothing yet
    page.click("text=Apply the import")
    expect(page.locator(".messages")).to_contain_text("1 updated")
    assert universe.lore_entries.get(entry_id="port-vey").text == "A harbour town, burnt in the war."

    # A broken file says where, and changes nothing.
    path.write_text(original.replace('kind = "place"', 'kind = "planet"'), encoding="utf-8")
    page.goto("/universes/import/")
    page.set_input_files("input[name=file]", str(path))
    page.click("button:has-text('Import')")
    expect(page.locator(".note.bad")).to_contain_text(re.compile(r"line \d+: lore\[1\] \(port-vey\)\.kind"))
    assert universe.lore_entries.get(entry_id="port-vey").kind == "place"
    no_console_errors(page, allow=("status of 400 (Bad Request) @ " + live_server.url + "/universes/import/",))


def test_import_character_book_png(page, live_server, login, author, universe, screenshot, tmp_path, queued):
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Mira",
            "character_book": {
                "entries": [
                    {
                        "id": 1,
                        "keys": ["Mira"],
                        "content": "Mira trades spice in Port Vey.",
                        "name": "Mira",
                        "enabled": True,
                        "insertion_order": 5,
                        "extensions": {},
                    },
                    {"id": 2, "keys": [], "content": "", "name": "Blank"},
                ]
            },
        },
    }
    info = PngInfo()
    info.add_text("chara", base64.b64encode(json.dumps(card).encode()).decode())
    buffer = io.BytesIO()
    Image.new("RGB", (64, 96), (120, 40, 40)).save(buffer, format="PNG", pnginfo=info)
    png = tmp_path / "mira.png"
    png.write_bytes(buffer.getvalue())

    login(page, author)
    page.goto(f"/universes/{universe.slug}/exchange/")
    page.set_input_files("#import-panel input[name=file]", str(png))
    page.select_option("#import-panel select[name=default_kind]", "character")
    page.click("#import-panel button[type=submit]")
    expect(page.locator("#import-report")).to_contain_text("the card's character")
    expect(page.locator("#import-panel")).to_contain_text("2 created")  # the Character entry and one book entry
    expect(page.locator("#import-report")).to_contain_text("no content and no keys")
    expect(page.locator("#import-panel")).to_contain_text("portrait")
    screenshot("png-import-report")
    character = universe.lore_entries.get(title="Mira", extensions__has_key="character_card")
    book_entry = universe.lore_entries.get(title="Mira", extensions__card=character.entry_id)
    assert character.kind == "character" and book_entry.extensions["character_book"]["insertion_order"] == 5

    # The Metadata page shows the card's fields, not its JSON; the PNG export is the same portrait.
    page.goto(f"/universes/{universe.slug}/meta/")
    expect(page.locator("dl.card-fields")).to_contain_text("Name")
    expect(page.get_by_role("link", name="Mira", exact=True)).to_have_attribute(
        "href", re.compile(f"/lore/{character.entry_id}/$")
    )
    page.goto(f"/universes/{universe.slug}/exchange/")
    with page.expect_download() as download:
        page.get_by_role("link", name="PNG card").first.click()
    exported = Path(download.value.path()).read_bytes()
    assert card_png.without_card_chunks(exported) == card_png.without_card_chunks(buffer.getvalue())
    no_console_errors(page)


def test_core_forms_work_without_javascript(browser, live_server, login, author, universe, queued):
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    page = context.new_page()
    try:
        login(page, author)
        page.goto(f"/universes/{universe.slug}/lore/")
        page.click("details summary")  # <details> opens without script
        page.fill("#lore-create input[name=new-title]", "Lighthouse")
        page.select_option("#lore-create select[name=new-kind]", "place")
        page.click("#lore-create button[type=submit]")
        assert page.url.endswith("/lore/lighthouse/")
        page.get_by_role("link", name="Edit", exact=True).click()
        page.fill("textarea[name=text]", "It still burns.")
        page.click("button:has-text('Save')")
        assert page.url.endswith("/lore/lighthouse/") and "It still burns." in page.content()
        assert universe.lore_entries.get(entry_id="lighthouse").text == "It still burns."
    finally:
        context.close()


def test_rename_delete_and_restore_from_history(page, live_server, login, author, universe, screenshot, queued):
    login(page, author)
    page.goto(f"/universes/{universe.slug}/")
    page.click("#universe-heading >> text=Rename")
    page.fill("#universe-heading input[name=name]", "Test World (renamed)")
    page.click("#universe-heading button[type=submit]")
    expect(page.locator("#universe-heading h1")).to_contain_text("Test World (renamed)")
    assert page.url.endswith(f"/universes/{universe.slug}/")

    page.goto(f"/universes/{universe.slug}/lore/")
    port_row = page.locator(f"#lore-row-{universe.lore_entries.get(entry_id='port-vey').pk}")
    port_row.get_by_role("link", name="Delete").click()  # hx-confirm is accepted by the fixture
    expect(port_row).to_have_count(0)
    expect(page.locator("#lore-totals")).to_contain_text("1 entry")
    assert not universe.lore_entries.filter(entry_id="port-vey").exists()

    page.click("text=Deleted entries")
    expect(page.locator("table")).to_contain_text("Port Vey")
    page.click("text=History and restore")
    expect(page.locator(".help")).to_contain_text("This entry is deleted")
    screenshot("history")
    page.click("button:has-text('Restore as it was before this deletion')")
    expect(page.locator("h1")).to_contain_text("Port Vey")
    restored = universe.lore_entries.get(entry_id="port-vey")
    assert restored.text == "A harbour town." and restored.backlinks.filter(entry_id="kael").exists()
    no_console_errors(page)
