"""Real-browser test fixtures: Playwright (sync API) driving Debian's Chromium.

Shared by every tests/browser/ module. Use:

    @pytest.mark.browser
    def test_something(page, live_server, login, author, screenshot):
        login(page, author)                       # session cookie for live_server
        page.goto(f"{live_server.url}/universes/")
        screenshot("universes")                   # test-artifacts/screenshots/<test>-universes.png

- `browser`: one headless Chromium per test session (/usr/bin/chromium).
- `page`: a fresh context and page per test; dialogs (hx-confirm) are accepted; console
  errors (e.g. a CSP violation) are collected in `page.console_errors`.
- `login(page, user)`: log `user` in by session cookie; `login_with_form(page, username,
  password)` goes through the real login form.
- `screenshot(label)`: save a full-page screenshot of the current page.

The live server runs in a thread of the test process, and Playwright's sync API keeps an
event loop in the main thread, so Django's async-safety check is switched off here.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
DEFAULT_TIMEOUT_MS = 15_000


def pytest_collection_modifyitems(items):
    """Every test under tests/browser/ is a browser test, marked or not."""
    for item in items:
        if "tests/browser/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(autouse=True)
def _role_groups(transactional_db):
    """Re-create the role groups: live-server tests flush the tables the migrations filled."""
    from django.contrib.auth.models import Group

    from studio.roles import AUTHORS, PLAYTESTERS

    for name in (AUTHORS, PLAYTESTERS):
        Group.objects.get_or_create(name=name)


@pytest.fixture(scope="session")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is not installed")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(DEFAULT_TIMEOUT_MS)
    page = context.new_page()
    page.console_errors = []
    page.on("console", lambda message: page.console_errors.append(
        f"{message.text} @ {message.location.get('url', '')}:{message.location.get('lineNumber', '')}"
    ) if message.type == "error" else None)
    page.on("dialog", lambda dialog: dialog.accept())
    yield page
    context.close()


@pytest.fixture
def login(live_server):
    """Return a function that logs a user in on the live server by session cookie."""
    from django.test import Client

    def do_login(page, user) -> None:
        client = Client()
        client.force_login(user)
        session = client.cookies["sessionid"].value
        page.context.add_cookies([{"name": "sessionid", "value": session, "url": live_server.url}])

    return do_login


@pytest.fixture
def login_with_form(live_server):
    def do_login(page, username: str, password: str) -> None:
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("input[name=username]", username)
        page.fill("input[name=password]", password)
        page.click("button[type=submit], input[type=submit]")
        page.wait_for_load_state()

    return do_login


@pytest.fixture
def screenshot(request, page):
    """Return a function saving a full-page screenshot under test-artifacts/screenshots/."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    test_name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)

    def take(label: str) -> Path:
        path = ARTIFACTS / f"{test_name}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', label)}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take
