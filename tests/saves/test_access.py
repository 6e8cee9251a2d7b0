"""The one access rule (`studio.universes.access`, `studio.saves.access`) and how each front end maps it.

The rule raises domain errors; a page answers them with 404 / 403, the API with its error
shape (`not_found` 404 naming what was asked for, `permission_denied` 403). Both front ends
call the same function, so a change of the rule reaches both.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import Http404

from studio.api.services import api_token_create
from studio.saves.access import Access, NotFound, RoleRequired, save_for, universe_for
from studio.world.models import Save, Universe

pytestmark = pytest.mark.django_db


@pytest.fixture
def reader(universe) -> User:
    """A member of the universe in no group: may read, may not act."""
    user = User.objects.create_user("reader", password="pw")
    universe.members.add(user)
    return user


def api_client(client, user):
    _, key = api_token_create(user=user, name="access")
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {key}"
    return client


# -- the rule --------------------------------------------------------------------------------


def test_a_save_one_may_not_see_and_a_missing_save_raise_the_same_error(outsider, playtester, game_save):
    with pytest.raises(NotFound) as hidden:
        save_for(user=outsider, save_id=game_save.save_id)
    with pytest.raises(NotFound) as missing:
        save_for(user=playtester, save_id="no-such-save")
    assert str(hidden.value) == str(missing.value) == "No such save, or you may not see it."
    assert hidden.value.what == "save"


def test_visibility_is_checked_before_the_role(outsider, game_save, universe):
    # An outsider asking to act learns nothing (not found), not that a role is missing.
    with pytest.raises(NotFound):
        save_for(user=outsider, save_id=game_save.save_id, access=Access.PLAY)
    with pytest.raises(NotFound):
        universe_for(user=outsider, slug=universe.slug, access=Access.EDIT)


def test_a_member_without_a_role_reads_but_may_not_act(reader, game_save, universe):
    assert save_for(user=reader, save_id=game_save.save_id) == game_save
    assert universe_for(user=reader, slug=universe.slug) == universe
    with pytest.raises(RoleRequired) as play:
        save_for(user=reader, save_id=game_save.save_id, access=Access.PLAY)
    assert play.value.access is Access.PLAY and "Playtester" in str(play.value)
    with pytest.raises(RoleRequired) as edit:
        universe_for(user=reader, slug=universe.slug, access=Access.EDIT)
    assert edit.value.access is Access.EDIT


def test_roles_playtesters_play_authors_edit_and_play(playtester, author, game_save, universe):
    assert save_for(user=playtester, save_id=game_save.save_id, access=Access.PLAY) == game_save
    with pytest.raises(RoleRequired):
        universe_for(user=playtester, slug=universe.slug, access=Access.EDIT)
    assert universe_for(user=author, slug=universe.slug, access=Access.EDIT) == universe
    assert save_for(user=author, save_id=game_save.save_id, access=Access.PLAY) == game_save


def test_staff_see_every_universe_without_membership(staff_user):
    elsewhere = Universe.objects.create(name="Elsewhere", slug="elsewhere")
    hidden = Save.objects.create(universe=elsewhere, name="Hidden")
    assert save_for(user=staff_user, save_id=hidden.save_id, access=Access.PLAY) == hidden
    assert universe_for(user=staff_user, slug="elsewhere", access=Access.EDIT) == elsewhere


def test_a_save_is_not_edited_like_a_universe(author, game_save):
    with pytest.raises(ValueError, match="read or played"):
        save_for(user=author, save_id=game_save.save_id, access=Access.EDIT)


def test_the_errors_are_what_pages_answer_with():
    # Pages need no mapping of their own: Django answers Http404 with 404, PermissionDenied with 403.
    assert issubclass(NotFound, Http404) and issubclass(RoleRequired, PermissionDenied)


# -- how pages and the API map the errors -------------------------------------------------------


def test_not_found_is_a_404_page_and_an_api_not_found_naming_the_object(client, outsider, game_save, universe):
    client.force_login(outsider)
    assert client.get(f"/saves/{game_save.save_id}/").status_code == 404
    assert client.get(f"/universes/{universe.slug}/").status_code == 404
    client.logout()
    api = api_client(client, outsider)
    response = api.get(f"/api/v1/saves/{game_save.save_id}")
    assert response.status_code == 404
    assert response.json()["error"] == {
        "code": "not_found",
        "message": "No such save, or you may not see it.",
        "details": {},
    }
    response = api.post("/api/v1/saves", {"universe": universe.slug, "name": "x"}, content_type="application/json")
    assert (
        response.status_code == 404
        and response.json()["error"]["message"] == "No such universe, or you may not see it."
    )


def test_role_required_is_a_403_page_and_an_api_permission_denied(client, reader, game_save, universe):
    client.force_login(reader)
    assert client.post(f"/saves/{game_save.save_id}/turns/", {"narrative": "x"}).status_code == 403
    assert client.post(f"/universes/{universe.slug}/rename/", {"name": "x"}).status_code == 403
    client.logout()
    api = api_client(client, reader)
    response = api.post(f"/api/v1/saves/{game_save.save_id}/turns", {"narrative": "x"}, content_type="application/json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    assert response.json()["error"]["message"] == str(RoleRequired(Access.PLAY))
    response = api.get(f"/api/v1/saves/{game_save.save_id}/export")
    assert response.status_code == 403 and response.json()["error"]["code"] == "permission_denied"


def test_pages_and_the_api_share_the_one_rule(client, monkeypatch, playtester, game_save):
    """Change the rule in its one place: the page and the API both follow."""
    from studio.universes import access

    monkeypatch.setattr(access, "may", lambda user, wanted: wanted is Access.READ)
    client.force_login(playtester)
    assert client.get(f"/saves/{game_save.save_id}/").status_code == 200
    assert client.post(f"/saves/{game_save.save_id}/turns/", {"narrative": "x"}).status_code == 403
    client.logout()
    api = api_client(client, playtester)
    assert api.get(f"/api/v1/saves/{game_save.save_id}").status_code == 200
    response = api.post(f"/api/v1/saves/{game_save.save_id}/turns", {"narrative": "x"}, content_type="application/json")
    assert response.status_code == 403
