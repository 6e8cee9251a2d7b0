"""Login lockout in a real browser: the login form, the lockout page, unlocking in the admin."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User


@pytest.fixture
def mira(transactional_db) -> User:
    return User.objects.create_user("mira", password="right-horse-battery")


@pytest.fixture
def admin_user(transactional_db) -> User:
    return User.objects.create_user("boss", password="boss-horse-battery", is_staff=True, is_superuser=True)


def submit_login(page, username: str, password: str):
    page.goto("/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    with page.expect_navigation() as navigation:
        page.click("button[type=submit]")
    return navigation.value


def browser_at(browser, live_server, address: str):
    """A browser whose requests arrive through one trusted proxy that names `address`."""
    context = browser.new_context(base_url=live_server.url, extra_http_headers={"X-Forwarded-For": address})
    context.set_default_timeout(15_000)
    return context, context.new_page()


@pytest.mark.browser
def test_lockout_page_then_an_administrator_unlocks_in_the_admin(
    browser, live_server, mira, admin_user, settings, screenshot
):
    # The live server sees every browser as 127.0.0.1; one trusted proxy (AXIOM_PROXY_COUNT)
    # lets the player and the administrator come from different addresses, as they would.
    settings.AXIOM_PROXY_COUNT = 1
    context, page = browser_at(browser, live_server, "203.0.113.7")
    for _ in range(4):
        assert submit_login(page, "mira", "wrong").status == 200
        assert page.is_visible("text=Your username and password didn't match")
    response = submit_login(page, "mira", "wrong")
    assert response.status == 429
    alert = page.locator("[role=alert]")
    assert "Logging in is locked for this account, or from this address, after 5 failed attempts." in alert.inner_text()
    assert page.is_visible("text=Try again in 15 minutes, or ask an administrator to unlock it sooner.")
    screenshot("locked", of=page)
    # The right password does not get in while locked.
    assert submit_login(page, "mira", "right-horse-battery").status == 429

    # An administrator, from another address, deletes the attempts in the admin.
    admin_context, admin = browser_at(browser, live_server, "198.51.100.2")
    admin.goto("/admin/login/")
    admin.fill("input[name=username]", "boss")
    admin.fill("input[name=password]", "boss-horse-battery")
    with admin.expect_navigation():
        admin.click("input[type=submit]")
    admin.goto("/admin/axes/accessattempt/")
    row = admin.locator("#result_list tbody tr", has_text="mira")
    assert row.count() >= 1
    for index in range(row.count()):
        row.nth(index).locator("input.action-select").check()
    admin.select_option("select[name=action]", "delete_selected")
    admin.click("button[name=index]")
    admin.click("input[type=submit]")  # "Yes, I'm sure"
    admin.wait_for_load_state()
    assert admin.locator("#result_list tbody tr", has_text="mira").count() == 0
    admin_context.close()

    response = submit_login(page, "mira", "right-horse-battery")
    assert response.status == 200
    assert page.url.rstrip("/") == live_server.url
    assert page.is_visible("text=mira")
    context.close()
