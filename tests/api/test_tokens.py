"""Tokens: created with a key shown once, stored as a hash, revocable in the studio and the admin."""

from __future__ import annotations

import hashlib

import pytest
from django.contrib.auth.models import User
from django.test import Client

from studio.api.models import ApiToken
from studio.api.services import api_token_authenticate, api_token_create, api_token_revoke

from tests.plugins.api import ApiClient

from tests.support.api_errors import error_code

pytestmark = pytest.mark.django_db


def test_key_is_stored_only_as_a_hash(playtester):
    token, key = api_token_create(user=playtester, name="engine")
    row = ApiToken.objects.get(pk=token.pk)
    assert key.startswith("axm_") and len(key) > 40
    assert row.key_hash == hashlib.sha256(key.encode()).hexdigest()
    assert row.prefix == key[: len(row.prefix)] and len(row.prefix) < len(key) // 2
    assert all(key not in str(value) for value in row.__dict__.values())


def test_token_authenticates_as_its_user_and_records_use(playtester):
    token, key = api_token_create(user=playtester, name="engine")
    response = ApiClient(key).get("/api/v1/me")
    assert response.status_code == 200
    body = response.json()
    assert body["username"] == "playtester"
    assert body["authenticated_by"] == "token"
    assert body["roles"] == {"staff": False, "author": False, "playtester": True}
    assert body["token"]["prefix"] == token.prefix
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_revoked_token_is_refused(playtester):
    token, key = api_token_create(user=playtester, name="engine")
    assert ApiClient(key).get("/api/v1/me").status_code == 200
    api_token_revoke(token=token)
    response = ApiClient(key).get("/api/v1/me")
    assert response.status_code == 401
    assert error_code(response) == "invalid_token"
    assert api_token_authenticate(key=key) is None


def test_token_of_a_deactivated_user_is_refused(playtester):
    _, key = api_token_create(user=playtester, name="engine")
    User.objects.filter(pk=playtester.pk).update(is_active=False)
    assert ApiClient(key).get("/api/v1/me").status_code == 401


@pytest.mark.parametrize(
    "header, code",
    [
        (None, "not_authenticated"),
        ("Bearer axm_not-a-real-key", "invalid_token"),
        ("Bearer nonsense", "invalid_token"),
        ("Token abc", "invalid_authorization_header"),
        ("Bearer", "invalid_authorization_header"),
    ],
)
def test_missing_or_bad_credentials_are_401_with_a_challenge(db, header, code):
    client = ApiClient(None)
    headers = {"Authorization": header} if header else None
    response = client.get("/api/v1/me", headers=headers)
    assert response.status_code == 401
    assert error_code(response) == code
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_a_bad_bearer_key_wins_over_a_valid_session(playtester):
    client = Client()
    client.force_login(playtester)
    assert client.get("/api/v1/me").json()["authenticated_by"] == "session"
    response = client.get("/api/v1/me", headers={"Authorization": "Bearer axm_wrong"})
    assert response.status_code == 401


# -- the studio pages ----------------------------------------------------------------------


def test_token_page_creates_a_token_and_shows_the_key_once(playtester):
    client = Client()
    client.force_login(playtester)
    assert client.get("/accounts/tokens/").status_code == 200
    response = client.post("/accounts/tokens/create/", {"name": "build box"})
    assert response.status_code == 201
    assert "no-store" in response["Cache-Control"]
    token = ApiToken.objects.get(user=playtester)
    html = response.content.decode()
    key = html.split('<code class="token-key">')[1].split("</code>")[0]
    assert key.startswith(token.prefix)
    assert api_token_authenticate(key=key) == token
    # Afterwards the list shows the prefix but never the key.
    later = client.get("/accounts/tokens/").content.decode()
    assert token.prefix in later and key not in later


def test_token_page_refuses_a_blank_name(playtester):
    client = Client()
    client.force_login(playtester)
    response = client.post("/accounts/tokens/create/", {"name": "  "})
    assert response.status_code == 400
    assert not ApiToken.objects.exists()


def test_token_page_needs_csrf(playtester):
    client = Client(enforce_csrf_checks=True)
    client.force_login(playtester)
    assert client.post("/accounts/tokens/create/", {"name": "x"}).status_code == 403
    assert not ApiToken.objects.exists()


def test_token_page_revokes_and_the_key_stops_working(playtester):
    token, key = api_token_create(user=playtester, name="engine")
    client = Client()
    client.force_login(playtester)
    response = client.post(f"/accounts/tokens/{token.pk}/revoke/")
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert ApiClient(key).get("/api/v1/me").status_code == 401


def test_token_revoke_with_htmx_returns_the_table_fragment(playtester):
    token, _ = api_token_create(user=playtester, name="engine")
    client = Client()
    client.force_login(playtester)
    response = client.post(f"/accounts/tokens/{token.pk}/revoke/", headers={"HX-Request": "true"})
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<table class="table" id="token-table">')
    assert "revoked" in html and "<html" not in html


def test_a_user_cannot_revoke_someone_elses_token(playtester, author):
    token, key = api_token_create(user=author, name="author's")
    client = Client()
    client.force_login(playtester)
    assert client.post(f"/accounts/tokens/{token.pk}/revoke/").status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None
    assert "author&#x27;s" not in client.get("/accounts/tokens/").content.decode()


def test_token_pages_require_login(db):
    response = Client().get("/accounts/tokens/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


# -- the admin -----------------------------------------------------------------------------


def test_admin_creates_a_token_and_shows_its_key_once(staff_user, playtester):
    client = Client()
    client.force_login(staff_user)
    response = client.post("/admin/api/apitoken/add/", {"user": playtester.pk, "name": "from admin"}, follow=True)
    assert response.status_code == 200
    token = ApiToken.objects.get(name="from admin")
    messages = [str(m) for m in response.context["messages"]]
    key = next(m.split(": ", 1)[1] for m in messages if "shown once" in m)
    assert api_token_authenticate(key=key) == token
    assert token.user == playtester


def test_admin_action_revokes_tokens(staff_user, playtester):
    token, key = api_token_create(user=playtester, name="engine")
    client = Client()
    client.force_login(staff_user)
    response = client.post("/admin/api/apitoken/", {"action": "revoke", "_selected_action": [token.pk]}, follow=True)
    assert response.status_code == 200
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert ApiClient(key).get("/api/v1/me").status_code == 401


def test_the_account_bar_links_to_the_token_page(playtester):
    client = Client()
    client.force_login(playtester)
    assert 'href="/accounts/tokens/"' in client.get("/accounts/tokens/").content.decode()


def test_token_names_are_escaped_on_the_page(playtester):
    client = Client()
    client.force_login(playtester)
    html = client.post("/accounts/tokens/create/", {"name": "<script>alert(1)</script>"}).content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>alert(1)</script>" not in client.get("/accounts/tokens/").content.decode()
