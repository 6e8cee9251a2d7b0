"""Playwright helpers for the playtesting browser tests (Debian chromium, headless).

Kept apart from a shared tests/browser/conftest.py so the two can evolve independently:
`pw_browser` launches /usr/bin/chromium once per module, `logged_in_page` opens a page on
the live server with the session cookie of a user logged in through Django's test client.
"""
from __future__ import annotations

import os
import shutil

import pytest

# Playwright's sync API runs an event loop in this thread; the ORM calls the tests make
# between browser steps are plain synchronous code, which Django would otherwise refuse.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def pw_browser():
    playwright_sync = pytest.importorskip("playwright.sync_api")
    with playwright_sync.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture
def logged_in_page(pw_browser, live_server, client):
    """Return `login(user) -> page`: a browser page carrying `user`'s session.

    Console errors (a CSP violation, a failed htmx request, a script error) fail the test.
    """
    contexts = []
    errors: list[str] = []

    def login(user):
        client.force_login(user)
        cookie = client.cookies["sessionid"]
        context = pw_browser.new_context(base_url=live_server.url)
        context.add_cookies([{"name": "sessionid", "value": cookie.value, "url": live_server.url}])
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(15_000)
        # Resource failures are reported by URL below (the console message has none).
        page.on("console", lambda m: m.type == "error" and not m.text.startswith("Failed to load resource") and errors.append(m.text))
        page.on("response", lambda r: r.status >= 400 and not r.url.endswith("/favicon.ico") and errors.append(f"{r.status} {r.url}"))
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        return page

    yield login
    for context in contexts:
        context.close()
    assert not errors, f"browser console errors: {errors}"
