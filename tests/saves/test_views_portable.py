"""The save file pages: the Export link and download, and the import page (full and htmx)."""

from __future__ import annotations

import gzip

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from studio.saves import portable
from studio.world.models import Save, Universe

from .portable_support import rich_save, table_counts

pytestmark = pytest.mark.django_db


def upload(data: bytes, name: str = "run.axiom-save.json") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/json")


def download(response) -> bytes:
    return b"".join(response.streaming_content)


def test_the_save_header_links_the_export_for_playtesters_only(client, playtester, universe, game_save):
    url = reverse("saves:export", args=[game_save.save_id])
    client.force_login(playtester)
    page = client.get(reverse("saves:timeline", args=[game_save.save_id])).content.decode()
    assert f'href="{url}"' in page and "Export save file" in page
    reader = User.objects.create_user("reader", password="pw")
    universe.members.add(reader)
    client.force_login(reader)
    page = client.get(reverse("saves:timeline", args=[game_save.save_id])).content.decode()
    assert "Export save file" not in page
    assert client.get(url).status_code == 403


def test_export_downloads_the_file_with_its_name(client, playtester, universe):
    save = rich_save(universe)
    client.force_login(playtester)
    response = client.get(reverse("saves:export", args=[save.save_id]))
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == 'attachment; filename="rich-run-turn-4.axiom-save.json"'
    data = download(response)
    assert data == portable.save_export(game_save=save).read() and int(response["Content-Length"]) == len(data)
    packed = client.get(reverse("saves:export", args=[save.save_id]), {"compress": "gzip"})
    assert packed["Content-Type"] == "application/gzip" and packed["Content-Disposition"].endswith('.json.gz"')
    assert gzip.decompress(download(packed)) == data


def test_the_import_page_full_and_fragment(client, playtester, universe):
    client.force_login(playtester)
    url = reverse("saves:import_save")
    page = client.get(url, {"universe": universe.slug}).content.decode()
    assert "<html" in page and 'id="import-save-form"' in page
    assert "rebuilt after the import" in page  # the vectors are not in the file, and the page says so
    assert f'<option value="{universe.pk}" selected>' in page
    assert "The universe named in the file" in page
    fragment = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith("<form") and "<html" not in fragment
    assert 'hx-encoding="multipart/form-data"' in fragment
    lists = client.get(reverse("saves:list")).content.decode()
    assert f'href="{url}"' in lists


def test_import_page_creates_a_new_save_in_the_universe_named_in_the_file(client, playtester, universe):
    save = rich_save(universe)
    data = portable.save_export(game_save=save).read()
    client.force_login(playtester)
    response = client.post(reverse("saves:import_save"), {"file": upload(data), "universe": "", "name": ""})
    imported = Save.objects.exclude(pk=save.pk).get()
    assert response.status_code == 302 and response["Location"] == imported.get_absolute_url()
    assert imported.universe == universe and imported.name == "Rich run"
    assert portable.save_export(game_save=imported).read() == data
    page = client.get(response["Location"]).content.decode()
    assert "Imported “Rich run” into Test World: 4 turns, 5 facts, 3 beliefs, 2 mental models" in page
    assert "being rebuilt (5 embedding jobs queued)" in page


def test_import_page_with_htmx_redirects_the_browser_and_shows_warnings(client, playtester, universe, author):
    other = Universe.objects.create(name="Other World", slug="other-world", owner=author)
    other.members.add(playtester)
    data = portable.save_export(game_save=rich_save(universe), compress=True).read()
    client.force_login(playtester)
    response = client.post(
        reverse("saves:import_save"),
        {"file": upload(data, "run.json.gz"), "universe": other.pk, "name": "Moved"},
        HTTP_HX_REQUEST="true",
    )
    imported = Save.objects.get(name="Moved")
    assert response.status_code == 200 and response["HX-Redirect"] == imported.get_absolute_url()
    assert imported.universe == other
    page = client.get(imported.get_absolute_url()).content.decode()
    assert "exported from the universe “Test World” (test-world)" in page


def test_a_malformed_file_lists_its_problems_and_writes_nothing(client, playtester, universe):
    client.force_login(playtester)
    data = portable.save_export(game_save=rich_save(universe)).read()
    before = table_counts()
    broken = data.replace(b'"turn_id":2}', b'"turn_id":7}', 1)
    response = client.post(
        reverse("saves:import_save"), {"file": upload(broken), "universe": ""}, HTTP_HX_REQUEST="true"
    )
    fragment = response.content.decode()
    assert response.status_code == 200 and "<html" not in fragment
    assert "Nothing was imported; the file has 1 problem:" in fragment
    assert "<code>sections.turns.items[1].turn_id</code>: turns must be numbered 1, 2, 3… in order" in fragment
    assert table_counts() == before
    response = client.post(reverse("saves:import_save"), {"file": upload(b"\x89PNG..."), "universe": universe.pk})
    assert "not UTF-8" in response.content.decode() and "<html" in response.content.decode()
    assert table_counts() == before


def test_the_import_page_refuses_universes_the_user_cannot_write(client, playtester, universe, author):
    hidden = Universe.objects.create(name="Hidden", slug="hidden", owner=author)
    save = Save.objects.create(universe=hidden, name="Secret")
    data = portable.save_export(game_save=save).read()
    client.force_login(playtester)
    before = table_counts()
    response = client.post(reverse("saves:import_save"), {"file": upload(data), "universe": ""})
    assert "which is not one of yours here; pick a universe" in response.content.decode()
    response = client.post(reverse("saves:import_save"), {"file": upload(data), "universe": hidden.pk})
    assert "Select a valid choice" in response.content.decode()
    assert table_counts() == before


def test_the_import_page_bounds_the_upload(client, playtester, universe, settings):
    settings.AXIOM_SAVE_FILE_MAX_BYTES = 1000
    client.force_login(playtester)
    response = client.post(reverse("saves:import_save"), {"file": upload(b" " * 1001), "universe": universe.pk})
    assert "The file is 1001 bytes; the limit is 1000 bytes" in response.content.decode()
    bomb = gzip.compress(b" " * 100_000)
    response = client.post(reverse("saves:import_save"), {"file": upload(bomb), "universe": universe.pk})
    assert "decompresses to more than 1000 bytes" in response.content.decode()
