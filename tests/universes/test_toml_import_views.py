"""The Universe-as-Code import page: create, diff preview, confirm, refusals."""

from __future__ import annotations

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from studio.universes.interchange.toml_io import export_universe
from studio.universes.models import LoreRevision
from studio.world.models import Universe

pytestmark = pytest.mark.django_db


def toml_file(text: str, name: str = "world.toml"):
    return SimpleUploadedFile(name, text.encode("utf-8"), content_type="application/toml")


def test_page_offers_the_form(author_client):
    html = author_client.get("/universes/import/").content.decode()
    assert "<html" in html and 'name="file"' in html and 'enctype="multipart/form-data"' in html


def test_new_slug_creates_a_universe_owned_by_the_importer(author_client, author, universe):
    text = export_universe(universe).replace('slug = "test-world"', 'slug = "fresh"')
    response = author_client.post("/universes/import/", {"file": toml_file(text)})
    fresh = Universe.objects.get(slug="fresh")
    assert response.status_code == 302 and response["Location"] == fresh.get_absolute_url()
    assert fresh.owner == author and fresh.lore_entries.count() == 2
    assert export_universe(fresh) == text


def test_existing_slug_shows_a_diff_then_applies_on_confirm(author_client, universe):
    text = export_universe(universe).replace("A harbour town.", "A harbour town <b>burnt</b>.")
    response = author_client.post("/universes/import/", {"file": toml_file(text)})
    html = response.content.decode()
    assert response.status_code == 200 and "Review the import" in html
    assert "A harbour town &lt;b&gt;burnt&lt;/b&gt;." in html and "<b>burnt</b>" not in html  # escaped
    assert universe.lore_entries.get(entry_id="port-vey").text == "A harbour town."  # nothing yet
    token = re.search(r'name="token" value="([^"]+)"', html).group(1)
    digest = re.search(r'name="digest" value="([^"]+)"', html).group(1)
    response = author_client.post("/universes/import/", {"token": token, "digest": digest, "confirm": "1"})
    assert response.status_code == 302
    assert universe.lore_entries.get(entry_id="port-vey").text == "A harbour town <b>burnt</b>."
    assert LoreRevision.objects.filter(entry_id="port-vey", action="import").count() == 1


def test_confirm_after_a_concurrent_change_shows_the_diff_again(author_client, universe, author):
    from studio.universes import services

    text = export_universe(universe).replace("A harbour town.", "Changed by the file.")
    html = author_client.post("/universes/import/", {"file": toml_file(text)}).content.decode()
    token = re.search(r'name="token" value="([^"]+)"', html).group(1)
    digest = re.search(r'name="digest" value="([^"]+)"', html).group(1)
    services.lore_entry_update(entry=universe.lore_entries.get(entry_id="kael"), user=author, text="Edited meanwhile.")
    response = author_client.post("/universes/import/", {"token": token, "digest": digest, "confirm": "1"})
    assert response.status_code == 200 and "changed since you opened this preview" in response.content.decode()
    assert universe.lore_entries.get(entry_id="port-vey").text == "A harbour town."


def test_bad_file_names_line_and_changes_nothing(author_client, universe):
    text = export_universe(universe).replace('kind = "place"', 'kind = "planet"')
    before = (Universe.objects.count(), LoreRevision.objects.count())
    response = author_client.post("/universes/import/", {"file": toml_file(text)})
    html = response.content.decode()
    assert response.status_code == 400 and "Nothing was imported." in html
    assert re.search(r"line \d+: lore\[1\] \(port-vey\)\.kind", html)
    assert (Universe.objects.count(), LoreRevision.objects.count()) == before
    response = author_client.post("/universes/import/", {"token": "not-a-real-token-at-all", "confirm": "1"})
    assert response.status_code == 400 and "preview has expired" in response.content.decode()


def test_slug_of_a_universe_the_user_cannot_see_is_refused(client, db, outsider):
    from django.contrib.auth.models import Group, User

    hidden = Universe.objects.create(name="Hidden", slug="hidden", owner=outsider)
    other = User.objects.create_user("author2", password="pw")
    other.groups.add(Group.objects.get_or_create(name="Authors")[0])
    client.force_login(other)
    text = export_universe(hidden).replace('name = "Hidden"', 'name = "Taken over"')
    response = client.post("/universes/import/", {"file": toml_file(text)})
    assert response.status_code == 400 and "belongs to a universe you cannot edit" in response.content.decode()
    hidden.refresh_from_db()
    assert hidden.name == "Hidden"


def test_playtester_cannot_import(client, playtester, universe):
    client.force_login(playtester)
    assert client.get("/universes/import/").status_code == 403
    assert client.post("/universes/import/", {"file": toml_file(export_universe(universe))}).status_code == 403


def test_meta_delete_without_js_redirects(author_client, universe):
    row = universe.meta.get(key="belief_mission")
    response = author_client.post(f"/universes/{universe.slug}/meta/{row.pk}/delete/")
    assert response.status_code == 302 and not universe.meta.exists()


def test_a_token_only_works_for_its_uploader(author_client, client, staff_user, universe):
    text = export_universe(universe).replace("A harbour town.", "Changed.")
    html = author_client.post("/universes/import/", {"file": toml_file(text)}).content.decode()
    token = re.search(r'name="token" value="([^"]+)"', html).group(1)
    digest = re.search(r'name="digest" value="([^"]+)"', html).group(1)
    client.force_login(staff_user)
    response = client.post("/universes/import/", {"token": token, "digest": digest, "confirm": "1"})
    assert response.status_code == 400 and universe.lore_entries.get(entry_id="port-vey").text == "A harbour town."


def test_a_file_larger_than_the_form_limit_survives_the_preview(author_client, universe, settings):
    from studio.world.models import LoreEntry

    for i in range(30):
        LoreEntry.objects.create(universe=universe, entry_id=f"big-{i:02d}", title=f"Big {i}", text="ab\ncd " * 30_000)
    text = export_universe(universe).replace("A harbour town.", "A harbour town, rebuilt.")
    assert len(text.encode()) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    html = author_client.post("/universes/import/", {"file": toml_file(text)}).content.decode()
    token = re.search(r'name="token" value="([^"]+)"', html).group(1)
    digest = re.search(r'name="digest" value="([^"]+)"', html).group(1)
    response = author_client.post("/universes/import/", {"token": token, "digest": digest, "confirm": "1"})
    assert response.status_code == 302
    assert universe.lore_entries.get(entry_id="port-vey").text == "A harbour town, rebuilt."
    assert universe.lore_entries.get(entry_id="big-07").text == "ab\ncd " * 30_000
