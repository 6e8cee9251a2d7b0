"""Lore Book pages: list/search/sort/paginate, inline create/edit/delete, bulk, status, history."""

from __future__ import annotations

import re

import pytest

from studio.universes import services
from studio.universes.models import LoreRevision
from studio.world.models import EmbeddingState, LoreEntry

pytestmark = pytest.mark.django_db


def row_ids(html: str) -> list[str]:
    """Entry ids of the Lore Book rows, in page order."""
    return re.findall(r'name="entries" value="([^"]+)"', html)


def url(universe, suffix=""):
    return f"/universes/{universe.slug}/lore/{suffix}"


def test_list_full_page_and_fragment(author_client, htmx, universe):
    page = author_client.get(url(universe)).content.decode()
    assert "<html" in page and "Kaël" in page and "Port Vey" in page and 'id="lore-create"' in page
    fragment = author_client.get(url(universe), **htmx).content.decode()
    assert fragment.startswith('\n<div id="lore-results">') or 'id="lore-results"' in fragment
    assert "<html" not in fragment and "Kaël" in fragment


def test_text_search_and_kind_filter(author_client, universe):
    assert row_ids(author_client.get(url(universe), {"q": "harbour"}).content.decode()) == ["port-vey"]
    assert row_ids(author_client.get(url(universe), {"kind": "character"}).content.decode()) == ["kael"]
    assert row_ids(author_client.get(url(universe), {"q": "smuggler", "kind": "place"}).content.decode()) == []
    LoreEntry.objects.filter(entry_id="kael").update(keys=["Kael the Fox"])
    assert row_ids(author_client.get(url(universe), {"q": "the fox"}).content.decode()) == ["kael"]  # an alias


def test_sort_orders_rows(author_client, universe):
    assert row_ids(author_client.get(url(universe), {"sort": "-title"}).content.decode()) == ["port-vey", "kael"]
    assert row_ids(author_client.get(url(universe), {"sort": "title"}).content.decode()) == ["kael", "port-vey"]


def test_pagination(author_client, author, universe):
    for i in range(60):
        LoreEntry.objects.create(universe=universe, entry_id=f"e{i:03d}", title=f"Entry {i:03d}", text="x")
    first = author_client.get(url(universe)).content.decode()
    assert "Page 1 of 2" in first and "62 entries" in first
    second = author_client.get(url(universe), {"page": 2}).content.decode()
    assert "Page 2 of 2" in second and row_ids(second)[-1] == "port-vey" and len(row_ids(second)) == 12


def test_semantic_search_degrades_with_visible_note(author_client, universe, monkeypatch):
    import studio.universes.selectors as selectors

    def broken(**kwargs):
        return selectors.SemanticResult([], "Semantic search is unavailable here (RuntimeError: no model).")

    monkeypatch.setattr("studio.universes.views.lore.lore_semantic_search", broken)
    html = author_client.get(url(universe), {"q": "harbour", "mode": "semantic"}).content.decode()
    assert "Semantic search is unavailable here" in html and "Showing text matches instead" in html
    assert "Port Vey" in html


def test_semantic_search_orders_by_engine_rank(author_client, universe, fake_vectors):
    # The store ranks port-vey (two shared words) before kael (none): not the title order.
    fake_vectors.sync_lore(
        universe.lore_scope_id, [{"entry_id": e.entry_id, "text": e.text} for e in universe.lore_entries.all()]
    )
    # A closer chunk of another type naming kael: only a search for lore chunks skips it.
    fake_vectors.embed_chunk(universe.lore_scope_id, 1, "A town by the sea.", metadata_extra={"entry_id": "kael"})
    html = author_client.get(url(universe), {"q": "a town by the sea", "mode": "semantic"}).content.decode()
    assert row_ids(html) == ["port-vey", "kael"] and "closest entries by meaning" in html


def test_create_without_js_redirects_and_records_revision(author_client, author, universe):
    response = author_client.post(
        url(universe, "new/"),
        {
            "new-title": "The Guild",
            "new-kind": "faction",
            "new-keys": "guild, thieves",
            "new-text": "A guild of thieves.",
            "new-links": "Kaël\nport-vey",
        },
    )
    entry = universe.lore_entries.get(entry_id="the-guild")
    assert response.status_code == 302 and response["Location"] == entry.get_absolute_url()
    assert entry.keys == ["guild", "thieves"] and entry.word_count == 4 and entry.token_count >= 4
    assert sorted(e.entry_id for e in entry.links.all()) == ["kael", "port-vey"]
    revision = LoreRevision.objects.get(entry_id="the-guild")
    assert revision.action == "create" and revision.author == author and revision.before is None
    assert revision.after["links"] == ["kael", "port-vey"]


def test_create_with_htmx_returns_row_and_oob_updates(author_client, htmx, universe):
    response = author_client.post(
        url(universe, "new/"), {"new-title": "Moonwell", "new-kind": "place", "new-text": "A well."}, **htmx
    )
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html
    assert 'id="lore-row-' in html and "Moonwell" in html
    assert 'id="lore-create-fields"' in html and 'id="embedding-poller"' in html and 'id="lore-totals"' in html
    assert html.count('hx-swap-oob="true"') >= 3 and "<strong>3</strong> entries" in html


def test_create_htmx_invalid_retargets_form(author_client, htmx, universe):
    response = author_client.post(
        url(universe, "new/"), {"new-title": "", "new-kind": "place", "new-links": "Nowhere"}, **htmx
    )
    html = response.content.decode()
    assert response["HX-Retarget"] == "#lore-create" and response["HX-Reswap"] == "outerHTML"
    assert "This field is required" in html and "No entry is titled" not in html  # Nowhere would be pending
    assert universe.lore_entries.count() == 2 and not universe.pending_lore_links.exists()


def test_create_full_page_form(author_client, universe):
    html = author_client.get(url(universe, "new/")).content.decode()
    assert "<html" in html and 'name="new-title"' in html


def test_edit_row_fragment_and_full_page(author_client, htmx, universe):
    fragment = author_client.get(url(universe, "kael/edit/"), **htmx).content.decode()
    assert fragment.strip().startswith('<tr id="lore-row-') and 'hx-include="closest tr"' in fragment
    assert "Port Vey" in fragment  # the current link, as a title
    page = author_client.get(url(universe, "kael/edit/")).content.decode()
    assert "<html" in page and "Edit “Kaël”" in page


def test_inline_edit_saves_and_marks_pending(author_client, htmx, universe, author):
    kael = universe.lore_entries.get(entry_id="kael")
    LoreEntry.objects.filter(pk=kael.pk).update(embedding_state=EmbeddingState.EMBEDDED)
    response = author_client.post(
        url(universe, "kael/edit/"),
        {
            "title": "Kaël the Smuggler",
            "kind": "character",
            "keys": "Kael",
            "text": "Kaël smuggles salt.",
            "links": "",
            "base_version": kael.version,
        },
        **htmx,
    )
    html = response.content.decode()
    assert "Kaël the Smuggler" in html and 'class="badge pending"' in html and "<html" not in html
    kael.refresh_from_db()
    assert kael.embedding_state == "pending" and kael.links.count() == 0 and kael.keys == ["Kael"]
    revision = LoreRevision.objects.filter(entry_id="kael", action="update").get()
    assert revision.before["text"] == "Kaël is a smuggler." and revision.after["text"] == "Kaël smuggles salt."
    assert revision.before["links"] == ["port-vey"] and revision.after["links"] == []


def test_edit_without_js_redirects(author_client, universe):
    version = universe.lore_entries.get(entry_id="kael").version
    response = author_client.post(
        url(universe, "kael/edit/"), {"title": "K", "kind": "character", "text": "t", "base_version": version}
    )
    assert response.status_code == 302 and response["Location"].endswith("/lore/kael/")


def test_edit_invalid_link_is_an_error_and_nothing_changes(author_client, htmx, universe):
    response = author_client.post(
        url(universe, "kael/edit/"), {"title": "K", "kind": "character", "links": "Kaël"}, **htmx
    )
    assert "cannot link to itself" in response.content.decode()
    assert universe.lore_entries.get(entry_id="kael").title == "Kaël"


def test_edit_unchanged_records_no_revision(author_client, universe):
    author_client.post(
        url(universe, "kael/edit/"),
        {
            "title": "Kaël",
            "kind": "character",
            "text": "Kaël is a smuggler.",
            "links": "Port Vey",
            "base_version": universe.lore_entries.get(entry_id="kael").version,
        },
    )
    assert not LoreRevision.objects.filter(entry_id="kael").exists()


def test_row_fragment_and_redirect(author_client, htmx, universe):
    fragment = author_client.get(url(universe, "kael/row/"), **htmx).content.decode()
    assert fragment.strip().startswith('<tr id="lore-row-') and "hx-swap-oob" not in fragment
    assert author_client.get(url(universe, "kael/row/")).status_code == 302


def test_delete_htmx_and_no_js(author_client, htmx, universe):
    page = author_client.get(url(universe, "kael/delete/")).content.decode()
    assert "Delete “Kaël”?" in page and "1 link" in page
    response = author_client.post(url(universe, "kael/delete/"), **htmx)
    assert response.status_code == 200 and 'id="lore-totals"' in response.content.decode()
    assert not universe.lore_entries.filter(entry_id="kael").exists()
    response = author_client.post(url(universe, "port-vey/delete/"))
    assert response.status_code == 302 and not universe.lore_entries.exists()
    deleted = author_client.get(url(universe, "deleted/")).content.decode()
    assert "Kaël" in deleted and "Port Vey" in deleted


def test_detail_shows_links_backlinks_and_counts(author_client, universe):
    html = author_client.get(url(universe, "port-vey/")).content.decode()
    backlinks = html.split("<h2>Backlinks</h2>")[1]
    assert "Kaël" in backlinks and "3 words" in html


def test_bulk_kind_change_htmx_and_no_js(author_client, htmx, universe):
    response = author_client.post(
        url(universe, "bulk/"), {"entries": ["kael", "port-vey"], "action": "kind", "new_kind": "faction"}, **htmx
    )
    html = response.content.decode()
    assert "Changed 2 entries to Faction" in html and 'id="lore-results"' in html and "<html" not in html
    assert set(universe.lore_entries.values_list("kind", flat=True)) == {"faction"}
    assert LoreRevision.objects.filter(action="update").count() == 2
    response = author_client.post(url(universe, "bulk/"), {"entries": ["kael"], "action": "kind", "new_kind": "item"})
    assert response.status_code == 302 and universe.lore_entries.get(entry_id="kael").kind == "item"


def test_bulk_delete_keeps_revisions_and_backlinks(author_client, htmx, universe):
    author_client.post(url(universe, "bulk/"), {"entries": ["port-vey"], "action": "delete"}, **htmx)
    revision = LoreRevision.objects.get(entry_id="port-vey", action="delete")
    assert revision.before["backlinks"] == ["kael"] and revision.after is None


def test_bulk_export_selection(author_client, universe):
    response = author_client.post(
        url(universe, "bulk/"), {"entries": ["kael"], "action": "export", "export_format": "toml"}
    )
    text = response.content.decode()
    assert (
        response["Content-Disposition"].endswith('selection.toml"')
        and 'entry_id = "kael"' in text
        and 'port-vey"\ntitle' not in text
    )
    response = author_client.post(
        url(universe, "bulk/"), {"entries": ["kael", "port-vey"], "action": "export", "export_format": "sillytavern"}
    )
    assert len(response.json()["entries"]) == 2


def test_bulk_without_selection_is_an_error(author_client, htmx, universe):
    html = author_client.post(url(universe, "bulk/"), {"action": "delete"}, **htmx).content.decode()
    assert "Select at least one entry" in html and universe.lore_entries.count() == 2


def test_bulk_ignores_other_universes_ids(author_client, outsider, universe):
    from studio.world.models import Universe

    other = Universe.objects.create(name="O", slug="o", owner=outsider)
    LoreEntry.objects.create(universe=other, entry_id="kael", title="Other Kael")
    author_client.post(url(universe, "bulk/"), {"entries": ["kael"], "action": "delete"})
    assert other.lore_entries.filter(entry_id="kael").exists()


def test_status_polling_stops_with_286_when_nothing_pending(author_client, htmx, universe):
    kael = universe.lore_entries.get(entry_id="kael")
    response = author_client.get(url(universe, "status/"), {"ids": [kael.pk]}, **htmx)
    assert response.status_code == 200 and "2 waiting" in response.content.decode()
    assert f'id="embed-{kael.pk}" class="badge pending" hx-swap-oob="true"' in response.content.decode()
    universe.lore_entries.update(embedding_state=EmbeddingState.EMBEDDED)
    response = author_client.get(url(universe, "status/"), {"ids": [kael.pk]}, **htmx)
    assert response.status_code == 286 and "badge embedded" in response.content.decode()
    page = author_client.get(url(universe, "status/"))
    assert page.status_code == 200 and "<html" in page.content.decode()


def test_list_polls_only_while_pending(author_client, universe):
    html = author_client.get(url(universe)).content.decode()
    assert 'hx-trigger="every 2s"' in html
    universe.lore_entries.update(embedding_state=EmbeddingState.EMBEDDED)
    html = author_client.get(url(universe)).content.decode()
    assert 'hx-trigger="every 2s"' not in html and "up to date" in html


def test_history_and_restore_of_deleted_entry(author_client, author, htmx, universe):
    kael = universe.lore_entries.get(entry_id="kael")
    services.lore_entry_update(entry=kael, user=author, text="Changed.")
    services.lore_entry_delete(entry=universe.lore_entries.get(entry_id="port-vey"), user=author)
    services.lore_entry_delete(entry=universe.lore_entries.get(entry_id="kael"), user=author)
    history = author_client.get(url(universe, "kael/history/")).content.decode()
    assert "This entry is deleted" in history and "Changed." in history
    assert "<html" not in author_client.get(url(universe, "kael/history/"), **htmx).content.decode()
    delete_revision = LoreRevision.objects.get(entry_id="kael", action="delete")
    response = author_client.post(url(universe, f"kael/history/{delete_revision.pk}/restore/"))
    assert response.status_code == 302
    kael = universe.lore_entries.get(entry_id="kael")
    assert kael.text == "Changed." and kael.links.count() == 0  # port-vey is gone
    update_revision = LoreRevision.objects.get(entry_id="kael", action="update")
    author_client.post(url(universe, f"kael/history/{update_revision.pk}/restore/"), **htmx)
    assert universe.lore_entries.get(entry_id="kael").text == "Changed."
    # restoring port-vey brings back Kaël's link to it (its backlink)
    pv = LoreRevision.objects.get(entry_id="port-vey", action="delete")
    response = author_client.post(url(universe, f"port-vey/history/{pv.pk}/restore/"), **htmx)
    assert response["HX-Redirect"].endswith("/lore/port-vey/")
    assert list(universe.lore_entries.get(entry_id="kael").links.values_list("entry_id", flat=True)) == ["port-vey"]
    assert LoreRevision.objects.filter(action="restore").count() == 2


def test_restore_brings_back_who_knows_the_entry(author_client, author, universe):
    port = universe.lore_entries.get(entry_id="port-vey")
    services.lore_entry_update(entry=port, user=author, known_by=["Kaël"])  # a secret Kaël keeps
    secret = LoreRevision.objects.filter(entry_id="port-vey", action="update").first()
    services.lore_entry_update(entry=port, user=author, known_by=None, text="Everyone knows it now.")
    history = author_client.get(url(universe, "port-vey/history/")).content.decode()
    assert "only Kaël" in history and "everyone" in history  # the history shows each change of secrecy
    author_client.post(url(universe, f"port-vey/history/{secret.pk}/restore/"))
    assert universe.lore_entries.get(entry_id="port-vey").known_by == ["Kaël"]
    services.lore_entry_update(entry=port, user=author, known_by=[])  # the narrator's alone
    services.lore_entry_delete(entry=universe.lore_entries.get(entry_id="port-vey"), user=author)
    deleted = LoreRevision.objects.filter(entry_id="port-vey", action="delete").first()
    author_client.post(url(universe, f"port-vey/history/{deleted.pk}/restore/"))
    assert universe.lore_entries.get(entry_id="port-vey").known_by == []
    # a revision recorded before `known_by` existed leaves the entry's secrecy as it is
    old = LoreRevision.objects.create(
        universe=universe,
        entry_id="port-vey",
        action="update",
        before=None,
        after={"title": "Port Vey", "kind": "place", "text": "Old text."},
    )
    author_client.post(url(universe, f"port-vey/history/{old.pk}/restore/"))
    restored = universe.lore_entries.get(entry_id="port-vey")
    assert restored.text == "Old text." and restored.known_by == []


def test_history_of_unknown_entry_is_404(author_client, universe):
    assert author_client.get(url(universe, "nobody/history/")).status_code == 404


def test_playtester_reads_but_cannot_write(client, playtester, universe):
    client.force_login(playtester)
    html = client.get(url(universe)).content.decode()
    assert "Kaël" in html and 'id="lore-create"' not in html and 'id="bulk-form"' not in html
    assert client.post(url(universe, "kael/edit/"), {"title": "X", "kind": "place"}).status_code == 403
    assert client.post(url(universe, "kael/delete/")).status_code == 403
    assert client.post(url(universe, "bulk/"), {"entries": ["kael"], "action": "delete"}).status_code == 403
    rev = LoreRevision.objects.create(
        universe=universe, entry_id="kael", action="update", before={}, after={"title": "x"}
    )
    assert client.post(url(universe, f"kael/history/{rev.pk}/restore/")).status_code == 403
    assert universe.lore_entries.get(entry_id="kael").title == "Kaël"


def test_user_text_is_escaped(author_client, universe, author):
    services.lore_entry_create(
        universe=universe,
        user=author,
        title="<script>alert(1)</script>",
        kind="item",
        text="<img src=x onerror=alert(2)>",
    )
    html = author_client.get(url(universe)).content.decode()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    entry = universe.lore_entries.get(kind="item")
    detail = author_client.get(entry.get_absolute_url()).content.decode()
    assert "<img src=x" not in detail


def test_edit_form_suggests_titles_mentioned_but_not_linked(author_client, author, htmx, universe):
    services.lore_entry_create(universe=universe, user=author, title="The Salt Guild", kind="faction")
    port = universe.lore_entries.get(entry_id="port-vey")
    services.lore_entry_update(entry=port, user=author, text="Kaël sells to the salt guild here. Salt is cheap.")
    fragment = author_client.get(url(universe, "port-vey/edit/"), **htmx).content.decode()
    assert "Mentioned in the text, not linked yet: Kaël, The Salt Guild" in fragment
    page = author_client.get(url(universe, "kael/edit/")).content.decode()
    assert "Mentioned in the text" not in page  # "Kaël is a smuggler." names no other entry


def oob_row(html: str, entry: LoreEntry) -> str:
    """The out-of-band row of `entry` in an htmx answer ("" when absent)."""
    match = re.search(rf'<tr id="lore-row-{entry.pk}" hx-swap-oob="true">.*?</tr>', html, re.S)
    return match.group(0) if match else ""


def test_inline_delete_refreshes_the_backlink_counts_and_offers_an_inline_restore(author_client, htmx, universe):
    """Kaël links to Port Vey: deleting Kaël inline swaps Port Vey's row (no backlink any more)
    out of band; Restore brings Kaël's row back in place and Port Vey's count with it."""
    port = universe.lore_entries.get(entry_id="port-vey")
    page = author_client.get(url(universe)).content.decode()
    assert "← 1 backlink" in page
    html = author_client.post(url(universe, "kael/delete/"), **htmx).content.decode()
    assert html.lstrip().startswith('<tr id="lore-deleted-kael"') and "Deleted “Kaël”." in html
    port_row = oob_row(html, port)
    assert port_row and "Port Vey" in port_row and "backlink" not in port_row
    assert 'id="lore-totals"' in html and "<strong>1</strong> entr" in html
    revision = LoreRevision.objects.get(entry_id="kael", action="delete")
    restore_url = url(universe, f"kael/history/{revision.pk}/restore/")
    assert f'hx-post="{restore_url}"' in html
    # The undo: the row comes back (not a redirect), with Port Vey's backlink restored.
    response = author_client.post(restore_url, {"inline": "1"}, **htmx)
    html = response.content.decode()
    kael = universe.lore_entries.get(entry_id="kael")
    assert response.status_code == 200 and "HX-Redirect" not in response
    assert html.lstrip().startswith(f'<tr id="lore-row-{kael.pk}">') and "→ " in html.split("</tr>")[0]
    assert "← 1 backlink" in oob_row(html, port)
    assert list(kael.links.values_list("entry_id", flat=True)) == ["port-vey"]
    assert "<strong>2</strong> entr" in html and 'hx-swap-oob="true"' in html.split('id="lore-totals"')[1][:40]
    # A restore from the history page (not inline) still goes to the entry's page.
    author_client.post(url(universe, "kael/delete/"), **htmx)
    revision = LoreRevision.objects.filter(entry_id="kael", action="delete").latest("pk")
    response = author_client.post(url(universe, f"kael/history/{revision.pk}/restore/"), **htmx)
    assert response["HX-Redirect"].endswith("/lore/kael/")


def test_inline_edit_and_create_refresh_the_rows_whose_backlinks_they_change(author_client, htmx, universe):
    """Unlinking Port Vey in Kaël's inline edit swaps Port Vey's row (no backlink left) out of
    band; an untouched link swaps nothing; a new entry linking to Port Vey swaps its row again."""
    port = universe.lore_entries.get(entry_id="port-vey")
    fields = {"title": "Kaël", "kind": "character", "keys": "", "text": "Kaël is a smuggler."}
    fields["base_version"] = universe.lore_entries.get(entry_id="kael").version
    same = author_client.post(url(universe, "kael/edit/"), {**fields, "links": "port-vey"}, **htmx).content.decode()
    assert oob_row(same, port) == ""  # the link did not change: nothing else to refresh
    fields["base_version"] = universe.lore_entries.get(entry_id="kael").version
    html = author_client.post(url(universe, "kael/edit/"), {**fields, "links": ""}, **htmx).content.decode()
    assert oob_row(html, port) and "backlink" not in oob_row(html, port)
    created = author_client.post(
        url(universe, "new/"),
        {
            "new-title": "Harbour Master",
            "new-kind": "character",
            "new-text": "Keeps the docks.",
            "new-links": "port-vey",
        },
        **htmx,
    ).content.decode()
    assert "← 1 backlink" in oob_row(created, port)
