"""Universe pages: list, create, rename, delete; access rules."""

from __future__ import annotations

import pytest
from django.urls import reverse

from studio.world.models import LoreEntry, Universe

pytestmark = pytest.mark.django_db


def test_list_shows_only_visible_universes(client, author, outsider, universe):
    Universe.objects.create(name="Secret", slug="secret", owner=outsider)
    client.force_login(author)
    page = client.get("/universes/").content.decode()
    assert "Test World" in page and "Secret" not in page
    fragment = client.get("/universes/", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="universe-table"' in fragment and "<html" not in fragment and "Secret" not in fragment


def test_create_without_js_redirects_and_makes_creator_owner(author_client, author):
    response = author_client.post("/universes/new/", {"name": "Dune Sea", "description": "Sand."})
    universe = Universe.objects.get(name="Dune Sea")
    assert response.status_code == 302 and response["Location"] == universe.get_absolute_url()
    assert universe.owner == author and universe.slug == "dune-sea"


def test_a_new_universe_opens_on_its_overview_with_htmx_too(author_client, htmx):
    response = author_client.post("/universes/new/", {"name": "Dune Sea"}, **htmx)
    universe = Universe.objects.get(name="Dune Sea")
    assert response.status_code == 200 and response["HX-Redirect"] == universe.get_absolute_url()
    assert "Created “Dune Sea”" in author_client.get(universe.get_absolute_url()).content.decode()


def test_create_invalid_shows_errors_both_ways(author_client, htmx, universe):
    response = author_client.post("/universes/new/", {"name": "X", "slug": "test-world"})
    assert response.status_code == 400 and "is taken" in response.content.decode()
    response = author_client.post("/universes/new/", {"name": ""}, **htmx)
    assert "This field is required" in response.content.decode() and "<html" not in response.content.decode()


def test_create_derives_free_slug(author_client, universe):
    author_client.post("/universes/new/", {"name": "Test World"})
    assert Universe.objects.filter(slug="test-world-2").exists()


def test_playtester_cannot_create_or_edit(client, playtester, universe):
    client.force_login(playtester)
    assert client.post("/universes/new/", {"name": "Nope"}).status_code == 403
    assert client.post(f"/universes/{universe.slug}/rename/", {"name": "Nope"}).status_code == 403
    assert client.get(f"/universes/{universe.slug}/").status_code == 200  # may still read it
    universe.refresh_from_db()
    assert universe.name == "Test World"


def test_outsider_gets_404_not_403(client, outsider, universe):
    client.force_login(outsider)
    for url in [
        f"/universes/{universe.slug}/",
        f"/universes/{universe.slug}/lore/",
        f"/universes/{universe.slug}/lore/kael/",
        f"/universes/{universe.slug}/missions/",
    ]:
        assert client.get(url).status_code == 404


def test_non_member_author_gets_404_on_writes(client, db, universe):
    from django.contrib.auth.models import Group, User

    other = User.objects.create_user("other-author", password="pw")
    other.groups.add(Group.objects.get_or_create(name="Authors")[0])
    client.force_login(other)
    assert (
        client.post(f"/universes/{universe.slug}/lore/new/", {"new-title": "X", "new-kind": "place"}).status_code == 404
    )
    assert not universe.lore_entries.filter(title="X").exists()


def test_anonymous_is_sent_to_login(client, universe):
    response = client.get(f"/universes/{universe.slug}/lore/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_rename_full_page_and_fragment(author_client, htmx, universe):
    page = author_client.get(f"/universes/{universe.slug}/rename/")
    assert page.status_code == 200 and "<html" in page.content.decode()
    fragment = author_client.get(f"/universes/{universe.slug}/rename/", **htmx).content.decode()
    assert 'id="universe-heading"' in fragment and "<html" not in fragment
    response = author_client.post(f"/universes/{universe.slug}/rename/", {"name": "New Name"}, **htmx)
    assert "New Name" in response.content.decode() and "<form" not in response.content.decode()
    response = author_client.post(f"/universes/{universe.slug}/rename/", {"name": "Other", "description": "d"})
    assert response.status_code == 302
    universe.refresh_from_db()
    assert (universe.name, universe.slug, universe.description) == ("Other", "test-world", "d")


def test_delete_confirm_page_lists_what_goes(author_client, universe, game_save):
    html = author_client.get(f"/universes/{universe.slug}/delete/").content.decode()
    assert "2 lore entries" in html and "1 save with 3 turns" in html and "1 metadata key" in html
    assert "memory test" not in html
    from studio.universes.memory_tests.services import memory_test_create

    memory_test_create(universe=universe, data={"name": "t", "kind": "no_findings"})
    html = author_client.get(f"/universes/{universe.slug}/delete/").content.decode()
    assert "1 memory test (and the results recorded on the saves)" in html


def test_delete_needs_slug_and_removes_everything(author_client, universe, game_save):
    response = author_client.post(f"/universes/{universe.slug}/delete/", {"confirm_slug": "wrong"})
    assert response.status_code == 400 and Universe.objects.filter(pk=universe.pk).exists()
    response = author_client.post(f"/universes/{universe.slug}/delete/", {"confirm_slug": universe.slug})
    assert response.status_code == 302 and response["Location"] == reverse("universes:list")
    assert not Universe.objects.filter(pk=universe.pk).exists()
    assert not LoreEntry.objects.filter(universe_id=universe.pk).exists()


def test_delete_with_htmx_redirects_client(author_client, htmx, universe):
    response = author_client.post(f"/universes/{universe.slug}/delete/", {"confirm_slug": universe.slug}, **htmx)
    assert response.status_code == 200 and response["HX-Redirect"] == reverse("universes:list")


def test_only_owner_may_delete(client, db, universe):
    from django.contrib.auth.models import Group, User

    member_author = User.objects.create_user("coauthor", password="pw")
    member_author.groups.add(Group.objects.get_or_create(name="Authors")[0])
    universe.members.add(member_author)
    client.force_login(member_author)
    assert client.post(f"/universes/{universe.slug}/delete/", {"confirm_slug": universe.slug}).status_code == 403
    assert Universe.objects.filter(pk=universe.pk).exists()


def test_overview_shows_book_totals(author_client, universe):
    html = author_client.get(f"/universes/{universe.slug}/").content.decode()
    assert "<strong>2</strong> entries" in html
    assert "Character: 1" in html and "Place: 1" in html
