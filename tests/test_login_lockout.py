"""Login throttling (django-axes): lockout per account and per address, through the real login form."""

from __future__ import annotations

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from studio.lockout import client_ip

LOGIN = "/accounts/login/"
LIMIT = 5  # the default of AXIOM_LOGIN_FAILURE_LIMIT (tests/settings.py leaves it unset)


@pytest.fixture
def player(db) -> User:
    return User.objects.create_user("mira", password="right-horse-battery")


def post_login(client: Client, username: str, password: str, *, address: str = "203.0.113.7", path: str = LOGIN):
    """Post the login form the page shows (username, password, next), as a browser at `address`."""
    page = client.get(path, REMOTE_ADDR=address)
    assert page.status_code == 200
    return client.post(path, {"username": username, "password": password, "next": "/"}, REMOTE_ADDR=address)


def logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def fail(client: Client, username: str, times: int, *, address: str = "203.0.113.7"):
    """Post `times` wrong passwords; every one but one reaching the limit gets the form's error."""
    for _ in range(times):
        response = post_login(client, username, "wrong", address=address)
        if response.status_code == 429:
            return response
        assert response.status_code == 200
        assert "Your username and password didn't match" in response.content.decode()
    return response


def lock(client: Client, username: str = "mira", *, address: str = "203.0.113.7") -> None:
    """Fail LIMIT times: the first LIMIT - 1 show the form's error, the LIMIT-th the lockout page."""
    for _ in range(LIMIT - 1):
        assert fail(client, username, 1, address=address).status_code == 200
    assert_locked_page(fail(client, username, 1, address=address))


def assert_locked_page(response) -> None:
    assert response.status_code == 429
    html = response.content.decode()
    assert "Too many failed logins" in html
    assert f"after {LIMIT} failed attempts" in html
    assert "Try again in 15 minutes" in html and "ask an administrator" in html
    assert response["Retry-After"] == str(15 * 60)


def test_the_account_locks_after_the_limit_even_with_the_right_password(client, player):
    lock(client)
    response = post_login(client, "mira", "right-horse-battery")
    assert_locked_page(response)
    assert not logged_in(client)
    # The lockout page is a studio page: the self-only CSP and the stylesheet are there.
    assert "default-src 'self'" in response["Content-Security-Policy"]
    assert "css/studio.css" in response.content.decode()


def test_one_failure_fewer_than_the_limit_still_logs_in(client, player):
    fail(client, "mira", LIMIT - 1)
    response = post_login(client, "mira", "right-horse-battery")
    assert response.status_code == 302
    assert logged_in(client)


def test_the_account_stays_locked_from_another_address(client, player):
    """Per account: spreading the guesses over addresses does not help."""
    for index in range(LIMIT - 1):
        assert fail(Client(), "mira", 1, address=f"198.51.100.{index + 1}").status_code == 200
    assert_locked_page(fail(Client(), "mira", 1, address="198.51.100.99"))
    response = post_login(client, "mira", "right-horse-battery", address="192.0.2.200")
    assert_locked_page(response)
    assert not logged_in(client)


def test_an_address_locks_after_the_limit_across_accounts(client, player):
    """Per address: one client trying many accounts is stopped, even for an account it knows."""
    for index in range(LIMIT - 1):
        assert fail(client, f"guess{index}", 1).status_code == 200
    assert_locked_page(fail(client, "guess-last", 1))
    assert_locked_page(post_login(client, "mira", "right-horse-battery"))
    # The same account from another address is not locked: its own count is 0.
    other = Client()
    assert post_login(other, "mira", "right-horse-battery", address="192.0.2.200").status_code == 302
    assert logged_in(other)


def test_the_lock_ends_after_the_cool_off(client, player):
    lock(client)
    assert post_login(client, "mira", "right-horse-battery").status_code == 429
    # Attempts while locked do not extend the lock (they are not even counted) ...
    assert AccessAttempt.objects.filter(username="mira").get().failures_since_start == LIMIT
    # ... and once the cool-off has passed since the last counted failure, the right password works.
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=15, seconds=1))
    response = post_login(client, "mira", "right-horse-battery")
    assert response.status_code == 302
    assert logged_in(client)


def test_an_administrator_unlocks_in_the_admin(client, player, staff_user):
    lock(client)
    assert post_login(client, "mira", "right-horse-battery").status_code == 429

    admin = Client()
    admin.force_login(staff_user)
    changelist = "/admin/axes/accessattempt/"
    listing = admin.get(changelist)
    assert listing.status_code == 200
    assert "mira" in listing.content.decode()
    attempt = AccessAttempt.objects.get(username="mira")
    response = admin.post(changelist, {"action": "delete_selected", "_selected_action": [attempt.pk], "post": "yes"})
    assert response.status_code == 302
    assert not AccessAttempt.objects.exists()

    response = post_login(client, "mira", "right-horse-battery")
    assert response.status_code == 302
    assert logged_in(client)


def test_the_reset_command_unlocks(client, player):
    lock(client)
    assert post_login(client, "mira", "right-horse-battery").status_code == 429
    call_command("axes_reset_username", "mira")
    assert post_login(client, "mira", "right-horse-battery").status_code == 302


def test_the_admin_login_form_is_throttled_too(client, staff_user):
    for _ in range(LIMIT - 1):
        response = post_login(client, "staff", "wrong", path="/admin/login/")
        assert response.status_code == 200
        assert "Please enter the correct username and password" in response.content.decode()
    assert post_login(client, "staff", "wrong", path="/admin/login/").status_code == 429
    response = post_login(client, "staff", "pw", path="/admin/login/")
    assert response.status_code == 429
    assert "Too many failed logins" in response.content.decode()
    assert not logged_in(client)


def test_the_limit_and_cool_off_come_from_settings(client, player, settings):
    settings.AXES_FAILURE_LIMIT = 2
    settings.AXIOM_LOGIN_COOLOFF_MINUTES = 0
    settings.AXES_COOLOFF_TIME = None
    assert fail(client, "mira", 1).status_code == 200
    assert fail(client, "mira", 1).status_code == 429
    response = post_login(client, "mira", "right-horse-battery")
    assert response.status_code == 429
    html = response.content.decode()
    assert "after 2 failed attempts" in html
    assert "until an administrator unlocks it" in html
    assert not response.has_header("Retry-After")
    # No cool-off: the lock does not end by itself.
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(days=30))
    assert post_login(client, "mira", "right-horse-battery").status_code == 429


def test_lockout_can_be_turned_off(client, player, settings):
    settings.AXES_ENABLED = False
    assert fail(client, "mira", LIMIT + 3).status_code == 200
    assert post_login(client, "mira", "right-horse-battery").status_code == 302


@pytest.mark.parametrize(
    ("proxies", "forwarded", "expected"),
    [
        (0, "", "10.0.0.2"),
        (0, "198.51.100.9", "10.0.0.2"),  # no proxy configured: the header is the client's own claim
        (1, "198.51.100.9", "198.51.100.9"),
        (1, "1.2.3.4, 198.51.100.9", "198.51.100.9"),  # the left entry was typed by the client
        (2, "1.2.3.4, 198.51.100.9, 10.0.0.5", "198.51.100.9"),
        (2, "198.51.100.9", "10.0.0.2"),  # fewer entries than proxies: not through all of them
    ],
)
def test_the_counted_address_trusts_only_the_configured_proxies(rf, settings, proxies, forwarded, expected):
    settings.AXIOM_PROXY_COUNT = proxies
    request = rf.post(LOGIN, REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR=forwarded)
    assert client_ip(request) == expected


@pytest.mark.parametrize(
    ("remote", "expected"),
    [
        ("172.18.0.5", "198.51.100.9"),  # through the proxy: the address it saw
        ("203.0.113.7", "203.0.113.7"),  # straight to gunicorn's port: its own address, header ignored
        ("", None),
    ],
)
def test_with_trusted_proxies_only_their_header_is_read(rf, settings, remote, expected):
    settings.AXIOM_PROXY_COUNT = 1
    settings.AXIOM_TRUSTED_PROXIES = ["172.18.0.0/16", "10.0.0.2"]
    request = rf.post(LOGIN, REMOTE_ADDR=remote, HTTP_X_FORWARDED_FOR="198.51.100.9")
    assert client_ip(request) == expected


def test_a_client_past_the_proxy_cannot_spread_its_failures_over_made_up_addresses(client, player, settings):
    settings.AXIOM_PROXY_COUNT = 1
    settings.AXIOM_TRUSTED_PROXIES = ["172.18.0.0/16"]
    statuses = [
        client.post(
            LOGIN,
            {"username": f"guess{index}", "password": "wrong"},
            REMOTE_ADDR="203.0.113.7",
            HTTP_X_FORWARDED_FOR=f"192.0.2.{index}",
        ).status_code
        for index in range(LIMIT)
    ]
    assert statuses == [200] * (LIMIT - 1) + [429]


def test_a_spoofed_forwarded_header_does_not_reset_the_address_count(client, player):
    """Without a proxy configured, varying X-Forwarded-For is still one address."""
    statuses = [
        client.post(
            LOGIN,
            {"username": f"guess{index}", "password": "wrong"},
            REMOTE_ADDR="203.0.113.7",
            HTTP_X_FORWARDED_FOR=f"192.0.2.{index}",
        ).status_code
        for index in range(LIMIT)
    ]
    assert statuses == [200] * (LIMIT - 1) + [429]
    assert_locked_page(post_login(client, "mira", "right-horse-battery"))
