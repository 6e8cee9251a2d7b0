"""Keyboard, focus and screen-reader behaviour, and axe-core on the main htmx states.

- Inline lore editing by keyboard: Edit moves focus into the editor, Esc cancels, Enter (or
  Ctrl+Enter in a text area) saves, and focus comes back to the row each time.
- A skip link, a visible focus ring, the phone menu (a disclosure button; Esc folds it).
- One id per element on pages that show two forms (a label never points at another form).
- axe finds no serious or critical violation with an inline editor open, a search with
  results and its why-not report, a rewind preview, an import report, an assembled context.
"""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from studio.world.models import LoreEntry

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def active(page) -> dict:
    """Describe the focused element: tag, name, id, its row's id and its focus outline."""
    return page.evaluate("""() => {
        const el = document.activeElement, style = getComputedStyle(el);
        const row = el.closest('tr');
        return {tag: el.tagName.toLowerCase(), name: el.getAttribute('name'), id: el.id,
                text: (el.textContent || '').trim(), row: row ? row.id : null,
                editing: !!(row && row.classList.contains('editing')),
                inlineEdit: el.hasAttribute('data-inline-edit'),
                outline: style.outlineStyle, outlineWidth: parseFloat(style.outlineWidth)};
    }""")


def test_inline_lore_edit_by_keyboard(page, live_server, login, author, world):
    kael = LoreEntry.objects.get(universe=world.universe, entry_id="kael")
    row_id = f"lore-row-{kael.pk}"
    login(page, author)
    page.goto(f"/universes/{world.universe.slug}/lore/")
    # A slow settle, as on a busy machine: htmx refocuses a field with the same id at once but
    # binds the new row's buttons only when it settles; keys pressed in between must still work.
    page.evaluate("() => { htmx.config.defaultSettleDelay = 400; }")
    row = page.locator(f"#{row_id}")

    # Edit: focus lands on the editor's first field, not on <body>.
    row.get_by_role("link", name="Edit Kaël").focus()
    page.keyboard.press("Enter")
    expect(page.locator(f"#{row_id}.editing")).to_be_visible()
    expect(page.locator(f"#{row_id} input[name=title]")).to_be_focused()

    # Esc cancels: nothing saved, focus back on the row's Edit link.
    page.locator(f"#{row_id} textarea[name=text]").fill("A draft nobody should see.")
    page.keyboard.press("Escape")
    expect(page.locator(f"#{row_id}.editing")).to_have_count(0)
    expect(row.locator("[data-inline-edit]")).to_be_focused()
    kael.refresh_from_db()
    assert kael.text == "Kaël is a smuggler of salt."

    # Enter in a one-line field saves; focus comes back to the row.
    page.keyboard.press("Enter")
    expect(page.locator(f"#{row_id} input[name=title]")).to_be_focused()
    page.keyboard.press("Control+a")
    page.keyboard.type("Kaël the Smuggler")
    page.keyboard.press("Enter")
    expect(page.locator(f"#{row_id}.editing")).to_have_count(0)
    expect(row).to_contain_text("Kaël the Smuggler")
    expect(row.locator("[data-inline-edit]")).to_be_focused()
    kael.refresh_from_db()
    assert kael.title == "Kaël the Smuggler"

    # Enter in the text area is a new line; Ctrl+Enter saves.
    page.keyboard.press("Enter")
    page.locator(f"#{row_id} textarea[name=text]").focus()
    page.keyboard.press("End")
    page.keyboard.press("Enter")
    page.keyboard.type("He owes Mira.")
    expect(page.locator(f"#{row_id}.editing")).to_have_count(1)
    page.keyboard.press("Control+Enter")
    expect(page.locator(f"#{row_id}.editing")).to_have_count(0)
    kael.refresh_from_db()
    assert kael.text == "Kaël is a smuggler of salt.\nHe owes Mira."
    expect(row.locator("[data-inline-edit]")).to_be_focused()

    # A refused save keeps the editor open, with focus on the field in error.
    page.keyboard.press("Enter")
    title = page.locator(f"#{row_id} input[name=title]")
    expect(title).to_be_focused()
    title.fill("")
    page.keyboard.press("Enter")
    expect(page.locator(f"#{row_id} input[name=title][aria-invalid=true]")).to_be_focused()
    page.keyboard.press("Escape")
    expect(row.locator("[data-inline-edit]")).to_be_focused()

    # Delete: focus moves to a neighbouring row rather than dropping to <body>.
    row.get_by_role("link", name="Delete Kaël the Smuggler").focus()
    page.keyboard.press("Enter")  # hx-confirm is accepted by the fixture
    expect(row).to_have_count(0)
    page.wait_for_function("() => document.activeElement.hasAttribute('data-inline-edit')")
    focused = active(page)
    assert focused["inlineEdit"] and focused["row"].startswith("lore-row-"), focused
    assert page.console_errors == []


def test_inline_metadata_edit_by_keyboard(page, live_server, login, author, world):
    row = world.universe.meta.get(key="belief_mission")
    login(page, author)
    page.goto(f"/universes/{world.universe.slug}/meta/")
    page.locator(f"#meta-row-{row.pk} [data-inline-edit]").focus()
    page.keyboard.press("Enter")
    expect(page.locator(f"#meta-row-{row.pk}.editing input[name=key]")).to_be_focused()
    page.keyboard.press("Escape")
    expect(page.locator(f"#meta-row-{row.pk} [data-inline-edit]")).to_be_focused()


def test_skip_link_and_a_visible_focus_ring(page, live_server, login, author, world):
    login(page, author)
    page.goto(f"/universes/{world.universe.slug}/")
    page.keyboard.press("Tab")
    skip = page.locator("a.skip-link")
    expect(skip).to_be_focused()
    box = skip.bounding_box()
    assert box["y"] >= 0 and box["height"] > 10, box  # shown on screen while focused
    assert active(page)["outline"] != "none"
    page.keyboard.press("Enter")
    expect(page.locator("main#main")).to_be_focused()
    page.keyboard.press("Tab")
    inside_main = page.evaluate("() => !!document.activeElement.closest('main')")
    assert inside_main, active(page)

    # Every kind of control shows a ring of at least 2 px when reached by keyboard.
    for target in ("header .brand", "nav.tabs a", "main a", "main button", "main input[type=text]", "main textarea"):
        page.goto(f"/universes/{world.universe.slug}/meta/")
        page.locator(target).first.focus()
        page.keyboard.press("Shift+Tab")
        page.keyboard.press("Tab")  # focus by keyboard, so :focus-visible applies
        ring = active(page)
        assert ring["outline"] not in ("none", "") and ring["outlineWidth"] >= 2, (target, ring)


def test_phone_menu_folds_and_opens(phone_page, live_server, login, author, world):
    page = phone_page
    login(page, author)
    page.goto("/")
    toggle = page.get_by_role("button", name="Menu")
    log_out = page.get_by_role("button", name="Log out")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(log_out).to_be_hidden()
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(log_out).to_be_visible()
    expect(page.get_by_role("link", name="API tokens")).to_be_visible()
    page.keyboard.press("Escape")
    expect(log_out).to_be_hidden()
    expect(toggle).to_be_focused()
    toggle.press("Enter")
    log_out.click()
    expect(page.locator("h1")).to_have_text("Log in")


def test_phone_menu_without_javascript_is_simply_open(browser, live_server, login, author, world):
    from tests.browser.pages import PHONE

    context = browser.new_context(base_url=live_server.url, viewport=PHONE, is_mobile=True, java_script_enabled=False)
    try:
        page = context.new_page()
        login(page, author)
        page.goto(f"/universes/{world.universe.slug}/lore/")
        expect(page.get_by_role("button", name="Log out")).to_be_visible()
        expect(page.get_by_role("button", name="Menu")).to_be_hidden()
        widths = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        assert widths[0] <= widths[1], widths
    finally:
        context.close()


def test_labels_point_at_their_own_forms_field(page, live_server, login, author, world):
    login(page, author)
    page.goto(f"/saves/{world.game_save.save_id}/rewind/")
    expect(page.get_by_label("Rewind to turn")).to_have_attribute("name", "turn")
    expect(page.locator("#rewind-pick").get_by_label("Rewind to turn")).to_have_count(1)
    expect(page.locator("#fork-form").get_by_label("Fork at turn")).to_have_count(1)
    page.goto(f"/universes/{world.universe.slug}/exchange/")
    forms = page.locator("form:has(input[type=file])").all()
    assert len(forms) == 2  # the Universe-as-Code import and the lore import
    for form in forms:
        field_id = form.locator("input[type=file]").get_attribute("id")
        expect(page.locator(f'label[for="{field_id}"]')).to_have_count(1)
        expect(form.locator(f'label[for="{field_id}"]')).to_have_count(1)
    page.goto("/saves/new/")
    for name in ("universe", "name", "memory_mode", "beliefs_enabled"):
        field = page.locator(f"#create-form [name={name}]")
        described = field.get_attribute("aria-describedby")
        assert described and page.locator(f"#{described}").inner_text().strip(), name


def test_main_htmx_states_pass_axe(page, live_server, login, author, world, axe, tmp_path, screenshot):
    from tests.browser.pages import duplicate_ids

    login(page, author)
    found: list[str] = []

    def check(state: str) -> None:
        page.wait_for_load_state("networkidle")
        found.extend(f"{state}: {line}" for line in axe(page) + duplicate_ids(page))

    slug, save_id = world.universe.slug, world.game_save.save_id
    page.goto(f"/universes/{slug}/lore/")
    page.locator("#lore-rows [data-inline-edit]").first.click()
    expect(page.locator("tr.editing")).to_have_count(1)
    check("lore inline edit open")
    page.locator("details.card summary").click()
    check("lore add-entry form open")

    page.goto(f"/universes/{slug}/meta/")
    page.locator("#meta-table [data-inline-edit]").first.click()
    expect(page.locator("#meta-table tr.editing")).to_have_count(1)
    check("metadata inline edit open")

    page.goto(f"/memory/{save_id}/search/")
    page.fill("#id_q", "silver crowns")
    page.click("#playground-form button[type=submit]")
    expect(page.locator("tr.result").first).to_be_visible()
    check("search with results")
    page.locator("tr.result a", has_text="ranks in every arm").first.click()
    expect(page.locator(".why-not-report")).to_be_visible()
    check("why-not report")

    page.goto(f"/memory/{save_id}/context/")
    page.fill("#id_q", "Mira asks about her silver crowns")
    page.click("#context-form button[type=submit]")
    expect(page.locator("#budget-line")).to_be_visible()
    check("context assembled")

    page.goto(f"/saves/{save_id}/rewind/")
    page.fill("#id_turn", "1")
    page.click("#rewind-pick button[type=submit]")
    expect(page.locator("#rewind-preview")).to_be_visible()
    check("rewind preview")

    page.goto(f"/saves/{save_id}/timeline/")
    page.locator("a", has_text="Edit narrative").first.click()
    expect(page.locator("li.turn.editing")).to_have_count(1)
    check("turn narrative editor open")

    card = tmp_path / "nera.json"
    card.write_text(
        json.dumps(
            {
                "spec": "chara_card_v2",
                "spec_version": "2.0",
                "data": {
                    "name": "Nera",
                    "character_book": {
                        "entries": [
                            {"id": 1, "keys": ["Nera"], "content": "Nera guards the gate.", "name": "Nera"},
                            {"id": 2, "keys": [], "content": "", "name": "Blank"},
                        ]
                    },
                },
            }
        ),
        encoding="utf-8",
    )
    page.goto(f"/universes/{slug}/exchange/")
    page.set_input_files("#import-panel input[name=file]", str(card))
    page.click("#import-panel button[type=submit]")
    expect(page.locator("#import-report")).to_contain_text("Nera")
    check("import report")
    screenshot("import-report")

    assert not found, "axe violations in htmx states:\n" + "\n".join(found)
    assert page.console_errors == [], page.console_errors


def test_login_page_logged_out_on_a_phone(phone_page, live_server, db, axe):
    page = phone_page
    page.goto("/accounts/login/")
    widths = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1], widths
    assert axe(page) == []
    expect(page.get_by_role("button", name="Menu")).to_have_count(0)  # nothing to fold when logged out
    expect(page.get_by_label("Username")).to_be_visible()
    assert page.console_errors == []
