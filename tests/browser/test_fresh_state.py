"""Real-browser tests that every action leaves the page telling the truth without a reload
(issue 15, "fresh state"): rewind, fork, append, inline lore delete and restore, import; and
the explain paths a user acts on (a turn's "Why not this turn?" link, the fused rank).

Each test marks the window before acting (`window.__noReload`): a reload or a full navigation
would drop the mark, so an update that only a reload brought is caught. Actions that must
navigate (fork, import) assert the new address instead.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from studio.world.models import Event, Save
from studio.universes import services

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def mark(page) -> None:
    page.evaluate("() => { window.__noReload = true; }")


def not_reloaded(page) -> bool:
    return page.evaluate("() => window.__noReload === true")


def test_rewind_updates_the_header_turn_and_the_pickers(logged_in_page, playtester, played):
    page = logged_in_page(playtester)
    page.goto(f"/saves/{played.save_id}/rewind/")
    expect(page.locator("#save-current-turn")).to_have_text("3")
    expect(page.locator("#rewind-pick label")).to_have_text("Rewind to turn (0 – 2)")
    mark(page)
    page.fill("#id_turn", "1")
    page.click("#rewind-pick button[type=submit]")
    page.wait_for_selector("#rewind-confirm")
    page.check("#rewind-confirm input[name=confirm]")
    page.click("#rewind-confirm button[type=submit]")
    expect(page.locator("#rewind-summary")).to_contain_text("Rewound to turn 1")
    expect(page.locator("#save-current-turn")).to_have_text("1")
    expect(page.locator("#rewind-pick label")).to_have_text("Rewind to turn (0 – 0)")
    assert page.get_attribute("#id_turn", "max") == "0"
    assert page.get_attribute("#id_fork_turn", "max") == "1" and page.input_value("#id_fork_turn") == "1"
    assert page.locator("#save-current-turn").count() == 1 and page.locator("#rewind-pick").count() == 1
    assert not_reloaded(page)
    played.refresh_from_db()
    assert played.current_turn == 1
    # The swapped-in picker works and knows the new range: turn 1 is refused by the browser
    # itself (max 0), turn 0 previews from turn 1 through htmx.
    page.fill("#id_turn", "1")
    page.click("#rewind-pick button[type=submit]")
    assert page.evaluate("() => document.querySelector('#id_turn').validity.rangeOverflow")
    page.fill("#id_turn", "0")
    page.click("#rewind-pick button[type=submit]")
    expect(page.locator("#rewind-preview")).to_contain_text("Preview: rewind from turn 1 to turn 0")
    assert not_reloaded(page)


def test_fork_lands_on_the_forks_own_address(logged_in_page, playtester, played):
    page = logged_in_page(playtester)
    page.goto(f"/saves/{played.save_id}/rewind/?turn=2")
    page.fill("#fork-form input[name=name]", "Fork to check")
    page.click("#fork-form button[type=submit]")
    page.wait_for_url(re.compile(r"/saves/(?!%s)[0-9a-f]+/$" % played.save_id))
    fork = Save.objects.get(name="Fork to check")
    assert page.url.endswith(f"/saves/{fork.save_id}/")
    expect(page.locator("h1.save-title")).to_have_text("Fork to check")
    expect(page.locator("#save-current-turn")).to_have_text("2")
    # Every tab now points at the fork, none at the original.
    hrefs = page.eval_on_selector_all("nav.tabs[aria-label=Save] a", "links => links.map(a => a.getAttribute('href'))")
    assert hrefs and all(fork.save_id in href and played.save_id not in href for href in hrefs)
    page.reload()  # what the address says is what was shown
    expect(page.locator("h1.save-title")).to_have_text("Fork to check")


def test_append_updates_the_header_turn_and_the_next_turn_number(logged_in_page, playtester, played):
    page = logged_in_page(playtester)
    page.goto(played.get_absolute_url())
    mark(page)
    page.fill("#id_player_input", "I pay Mira back.")
    page.fill("#id_narrative", "Kaël counts twelve silver crowns into Mira's palm.")
    page.click("#append-form button[type=submit]")
    expect(page.locator("#save-current-turn")).to_have_text("4")
    expect(page.get_by_role("heading", name="Write turn 5 by hand")).to_be_visible()
    assert page.input_value("#append-form input[name=expected_turn_id]") == "5"
    assert not_reloaded(page)
    assert Event.objects.filter(game_save=played).count() == 4


def test_inline_delete_and_restore_keep_backlink_counts_and_totals_true(logged_in_page, author, universe, monkeypatch):
    monkeypatch.setattr(services.lore, "_sync_lore_now", lambda universe_pk: None)
    kael = universe.lore_entries.get(entry_id="kael")
    port = universe.lore_entries.get(entry_id="port-vey")
    page = logged_in_page(author)
    page.goto(f"/universes/{universe.slug}/lore/")
    port_links = page.locator(f"#lore-row-{port.pk} td:nth-child(6)")  # the Links cell
    expect(port_links).to_contain_text("← 1 backlink")
    expect(page.locator("#lore-totals strong").first).to_have_text("2")
    mark(page)
    page.click(f"#lore-row-{kael.pk} a[aria-label='Delete Kaël']")
    expect(page.locator("#lore-deleted-kael")).to_contain_text("Deleted “Kaël”.")
    expect(port_links).not_to_contain_text("backlink")
    expect(page.locator("#lore-totals strong").first).to_have_text("1")
    assert page.locator(f"#lore-row-{port.pk}").count() == 1  # swapped in place, not added
    page.click("#lore-deleted-kael button:has-text('Restore')")
    expect(page.locator("#lore-deleted-kael")).to_have_count(0)
    restored = universe.lore_entries.get(entry_id="kael")
    expect(page.locator(f"#lore-row-{restored.pk}")).to_contain_text("Kaël")
    expect(page.locator(f"#lore-row-{restored.pk}")).to_contain_text("Port Vey")  # its link is back
    expect(port_links).to_contain_text("← 1 backlink")
    expect(page.locator("#lore-totals strong").first).to_have_text("2")
    assert not_reloaded(page)


def test_transcript_import_lands_on_the_new_save_with_its_turns(
    logged_in_page, playtester, universe, settings, tmp_path, vector_memory
):
    settings.AXIOM_JOBS_EAGER, settings.REDIS_URL = True, ""
    transcript = tmp_path / "run.jsonl"
    transcript.write_text('{"player_input": "look", "narrative": "Fog over Port Vey."}\n{"narrative": "Rain."}\n')
    page = logged_in_page(playtester)
    page.goto("/saves/import/transcript/")
    page.select_option("#import-form select[name=universe]", str(universe.pk))
    page.fill("#import-form input[name=name]", "Imported run")
    page.set_input_files("#import-form input[type=file]", str(transcript))
    page.click("#import-form button[type=submit]")
    page.wait_for_url(re.compile(r"/saves/[0-9a-f]+/$"))
    imported = Save.objects.get(name="Imported run")
    assert page.url.endswith(imported.get_absolute_url())
    expect(page.locator("#save-current-turn")).to_have_text("2")
    expect(page.locator("#console-turns li[data-turn]")).to_have_count(2)
    page.goto(f"/saves/?universe={universe.slug}")
    expect(page.locator("#save-table")).to_contain_text("Imported run")


def test_why_not_this_turn_from_the_timeline_explains_that_turns_chunk(
    logged_in_page, playtester, played, vector_memory
):
    chunk_id = next(c["id"] for c in vector_memory.get_chunks(played.save_id) if c["turn_id"] == 1)
    page = logged_in_page(playtester)
    page.goto(f"/saves/{played.save_id}/timeline/")
    turn1 = page.locator("#turn-1")
    expect(turn1.locator("code[title='chunk id']")).to_have_text(chunk_id)
    turn1.locator("a.why-not-link").click()
    page.wait_for_url(re.compile(r"/search/\?chunk_id=" + chunk_id))
    assert page.input_value("#why-not-chunk") == chunk_id
    expect(page.locator("#why-not-asked")).to_contain_text(chunk_id)
    page.fill("#id_q", "silver crowns")
    page.fill("#id_k", "1")
    page.click("#playground-form button[type=submit]")
    report = page.locator(f".why-not-report[data-chunk='{chunk_id}']")
    expect(report).to_contain_text("Not in the top 1")
    fused = report.locator("tr[data-arm=fused]")
    expect(fused).to_contain_text("outside the top 1")
    assert re.match(r"#\d+", fused.locator("td").first.inner_text())
    assert "chunk_id=" + chunk_id in page.url  # the question stays in the address
    # The results' own Fused column: the top hit is fused #1 with its RRF score.
    expect(page.locator("tr.result").first.locator("td[data-explain=fused]")).to_contain_text("#1")
    expect(page.locator("tr.result").first.locator("td[data-explain=fused]")).to_contain_text("RRF 0.")


def test_the_new_htmx_states_fit_a_phone_and_pass_axe(phone_page, login, author, world, axe, vector_memory):
    """The states this file adds, at 390x844: the rewind summary with its out-of-band swaps, the
    undo row of an inline delete and the restored row, meaning-search scores, a search asked
    about one chunk with its report."""
    from tests.browser.pages import duplicate_ids, overflow

    page = phone_page
    login(page, author)
    found: list[str] = []

    def check(state: str) -> None:
        page.wait_for_load_state("networkidle")
        widths = overflow(page)
        if widths["scrollWidth"] > widths["clientWidth"]:
            found.append(f"{state}: too wide {widths}")
        found.extend(f"{state}: {line}" for line in axe(page) + duplicate_ids(page))

    slug, save_id = world.universe.slug, world.game_save.save_id
    page.goto(f"/saves/{save_id}/rewind/")
    page.fill("#id_turn", "1")
    page.click("#rewind-pick button[type=submit]")
    page.check("#rewind-confirm input[name=confirm]")
    page.click("#rewind-confirm button[type=submit]")
    expect(page.locator("#rewind-summary")).to_be_visible()
    expect(page.locator("#save-current-turn")).to_have_text("1")
    check("rewind summary")

    mira = world.universe.lore_entries.get(entry_id="mira")
    page.goto(f"/universes/{slug}/lore/")
    page.click(f"#lore-row-{mira.pk} a[aria-label='Delete Mira']")
    expect(page.locator("#lore-deleted-mira")).to_be_visible()
    check("lore row deleted, undo offered")
    page.click("#lore-deleted-mira button:has-text('Restore')")
    expect(page.locator("#lore-deleted-mira")).to_have_count(0)
    check("lore row restored")

    vector_memory.sync_lore(
        world.universe.lore_scope_id,
        [{"entry_id": e.entry_id, "text": e.text, "title": e.title} for e in world.universe.lore_entries.all()],
    )
    page.goto(f"/universes/{slug}/lore/?q=moneylender+silver&mode=semantic")
    expect(page.locator(".meaning-score").first).to_contain_text("meaning #1")
    check("meaning search with scores")

    chunk_id = vector_memory.get_chunks(save_id, chunk_type="narrative")[0]["id"]
    page.goto(f"/memory/{save_id}/search/?chunk_id={chunk_id}")
    page.fill("#id_q", "silver crowns")
    page.click("#playground-form button[type=submit]")
    expect(page.locator(f".why-not-report[data-chunk='{chunk_id}']")).to_be_visible()
    check("search asked about one chunk")
    assert not found, "phone width / axe findings:\n" + "\n".join(found)
