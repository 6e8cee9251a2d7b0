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
- `screenshot(label, of=page)`: save a full-page screenshot of the current page.
- `world`: a universe and a living save with content on every page (tests/browser/pages.py).
- `phone_page`: like `page`, at 390x844 with a phone's touch and viewport handling.
- `axe(page, context=None)`: run axe-core (tests/browser/node_modules, `npm ci` when missing)
  on the current page and return its serious and critical violations as readable lines.
  axe is fetched by the page from a Playwright route on the live server's own origin, so the
  self-only Content-Security-Policy stays enforced while it runs and nothing serves it to users.

The live server runs in a thread of the test process, and Playwright's sync API keeps an
event loop in the main thread, so Django's async-safety check is switched off here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.browser.pages import ARTIFACTS, PHONE


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
DEFAULT_TIMEOUT_MS = 15_000
NODE_DIR = Path(__file__).resolve().parent
AXE_SCRIPT = NODE_DIR / "node_modules" / "axe-core" / "axe.min.js"
AXE_URL_PATH = "/__browser-tests__/axe.min.js"  # answered by a Playwright route, never by Django
AXE_BLOCKING = ("serious", "critical")


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
    # `expect(...)` waits as long as actions do: the machine is shared, and a swap can take
    # longer than Playwright's 5 s default under load without anything being wrong.
    sync_api.expect.set_options(timeout=DEFAULT_TIMEOUT_MS)
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is not installed")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def _new_page(browser, live_server, **context_options):
    context = browser.new_context(base_url=live_server.url, **context_options)
    context.set_default_timeout(DEFAULT_TIMEOUT_MS)
    page = context.new_page()
    page.console_errors = []
    page.on(
        "console",
        lambda message: (
            page.console_errors.append(
                f"{message.text} @ {message.location.get('url', '')}:{message.location.get('lineNumber', '')}"
            )
            if message.type == "error"
            else None
        ),
    )
    page.on("dialog", lambda dialog: dialog.accept())
    return context, page


@pytest.fixture
def page(browser, live_server):
    context, page = _new_page(browser, live_server, viewport={"width": 1280, "height": 900})
    yield page
    context.close()


@pytest.fixture
def phone_page(browser, live_server):
    context, page = _new_page(
        browser,
        live_server,
        viewport=PHONE,
        screen=PHONE,
        device_scale_factor=2,
        is_mobile=True,
        has_touch=True,
    )
    yield page
    context.close()


@pytest.fixture
def world(universe, game_save, author, vector_memory, monkeypatch):
    """A universe and a living save with something on every page (tests/browser/pages.py).

    Lore edits queue no real embedding job here (the entries are marked embedded).
    """
    from studio.universes import services

    monkeypatch.setattr(services.lore, "_sync_lore_now", lambda universe_pk: None)
    from tests.browser.pages import build_world

    return build_world(universe=universe, game_save=game_save, author=author, vector_memory=vector_memory)


@pytest.fixture(scope="session")
def axe_script() -> Path:
    """Return axe-core's script, installing tests/browser/package-lock.json with `npm ci` if missing."""
    if not AXE_SCRIPT.exists():
        npm = shutil.which("npm")
        assert npm, "axe-core is not installed and npm is missing: apt-get install npm, then npm ci in tests/browser"
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR, check=True, timeout=300)
    assert AXE_SCRIPT.exists(), f"npm ci did not install {AXE_SCRIPT}"
    return AXE_SCRIPT


@pytest.fixture
def axe(axe_script):
    """Return `check(page, context=None) -> list[str]`: serious or critical axe violations.

    `context` is a CSS selector to check only part of the page (an htmx fragment); the default
    is the whole document. Each line names the rule, the impact, the element and axe's advice.
    """
    routed: set[int] = set()

    def check(page, context: str | None = None) -> list[str]:
        if id(page.context) not in routed:
            page.context.route(
                f"**{AXE_URL_PATH}", lambda route: route.fulfill(path=str(axe_script), content_type="text/javascript")
            )
            routed.add(id(page.context))
        if not page.evaluate("() => typeof window.axe === 'object'"):
            page.add_script_tag(url=AXE_URL_PATH)
        violations = page.evaluate(
            """async (context) => {
                const results = await axe.run(context ? document.querySelector(context) : document,
                                              {resultTypes: ["violations"]});
                return results.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                    nodes: v.nodes.map(n => ({target: n.target.join(" "), summary: n.failureSummary}))}));
            }""",
            context,
        )
        lines = []
        for violation in violations:
            if violation["impact"] not in AXE_BLOCKING:
                check.lesser.append(f"{page.url} {violation['id']} ({violation['impact']}) x{len(violation['nodes'])}")
                continue
            for node in violation["nodes"]:
                lines.append(
                    f"{violation['id']} ({violation['impact']}): {node['target']}: {violation['help']}. {node['summary']}"
                )
        return lines

    check.lesser = []  # moderate and minor findings, for the record (they do not fail a test)
    return check


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
def logged_in_page(page, login):
    """Return `as_user(user) -> page` (the shared page, logged in); page errors fail the test.

    Any HTTP error response (the favicon aside), uncaught script error or console error
    seen while the test ran fails it at teardown.
    """
    failures: list[str] = []
    page.on(
        "response",
        lambda r: r.status >= 400 and not r.url.endswith("/favicon.ico") and failures.append(f"{r.status} {r.url}"),
    )
    page.on("pageerror", lambda exc: failures.append(str(exc)))

    def as_user(user):
        login(page, user)
        return page

    yield as_user
    # The favicon's 404 is the only resource failure allowed; its console line has no URL.
    console = [e for e in page.console_errors if not e.startswith("Failed to load resource")]
    assert not failures and not console, f"browser errors: {failures + console}"


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
def screenshot(request):
    """Return `take(label, of=None)`: save a full-page screenshot under test-artifacts/screenshots/.

    `of` is the page to picture; the default is the test's `page` fixture.
    """
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    test_name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)

    def take(label: str, of=None) -> Path:
        target = of if of is not None else request.getfixturevalue("page")
        path = ARTIFACTS / f"{test_name}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', label)}.png"
        target.screenshot(path=str(path), full_page=True)
        return path

    return take


# Jobs run inline when their transaction commits (no worker); `played` is the shared save with
# three turns embedded, which the playtesting and fresh-state pages start from.
@pytest.fixture
def eager(settings):
    settings.AXIOM_JOBS_EAGER = True
    settings.REDIS_URL = ""
    return settings


@pytest.fixture
def played(game_save, vector_memory, eager):
    vector_memory.embed_chunks(
        game_save.save_id,
        [
            {"turn_id": 1, "text": "Kaël docks at Port Vey with contraband."},
            {"turn_id": 2, "text": "Mira lends Kaël ten silver crowns."},
            {"turn_id": 3, "text": "A storm drowns the harbour lights."},
        ],
    )
    return game_save
