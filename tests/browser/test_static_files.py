"""The compose-shaped server in a real browser: gunicorn, DEBUG off, collectstatic, WhiteNoise.

docker-compose runs `gunicorn studio.wsgi` with DEBUG=0 on an image where collectstatic ran
(Dockerfile). This starts the same thing here, with the production settings module
(`studio.settings`, not the test settings: the hashed, compressed storage and its manifest)
on a SQLite file of its own, and opens it in Chromium: the stylesheet, the studio script and
htmx must load (200) and take effect, under the self-only CSP; the login lockout must hold
across gunicorn's workers.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "static-files-horse-battery"
HASHED = re.compile(r"\.[0-9a-f]{12}\.(css|js)$")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ComposeServer:
    def __init__(self, tmp: Path):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        keep = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(
                (
                    "DJANGO_",
                    "DATABASE_URL",
                    "CHROMA_",
                    "REDIS_URL",
                    "AXIOM_",
                    "SECRET_KEY",
                    "DEBUG",
                    "ALLOWED_HOSTS",
                    "SECURE_",
                    "SESSION_COOKIE",
                    "CSRF_",
                    "STATIC_ROOT",
                    "PYTEST",
                )
            )
        }
        # What docker-compose.yml's x-studio-env sets for the web process (no proxy, no TLS).
        self.env = {
            **keep,
            "DJANGO_SETTINGS_MODULE": "studio.settings",
            "PYTHONPATH": str(ROOT),
            "DEBUG": "0",
            "SECRET_KEY": "static-files-test-secret-key-not-for-production",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "CSRF_TRUSTED_ORIGINS": self.url,
            "SECURE_SSL_REDIRECT": "0",
            "SESSION_COOKIE_SECURE": "0",
            "CSRF_COOKIE_SECURE": "0",
            "DATABASE_URL": f"sqlite:///{tmp / 'studio.sqlite3'}",
            "AXIOM_VAR_DIR": str(tmp / "var"),
            "STATIC_ROOT": str(tmp / "staticfiles"),
        }
        self.log = tmp / "gunicorn.log"
        self.process: subprocess.Popen | None = None

    def manage(self, *args: str, input: str | None = None) -> str:
        proc = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            input=input,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, f"manage.py {' '.join(args)}: {proc.stdout}{proc.stderr}"
        return proc.stdout

    def start(self) -> None:
        gunicorn = str(Path(sys.executable).parent / "gunicorn")
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [gunicorn, "studio.wsgi", "--bind", f"127.0.0.1:{self.port}", "--workers", "2", "--timeout", "60"],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"gunicorn exited: {self.log.read_text()[-3000:]}"
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"gunicorn did not answer within 60 s: {self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def compose_server(tmp_path_factory):
    server = ComposeServer(tmp_path_factory.mktemp("compose-server"))
    server.manage("collectstatic", "--noinput")
    server.manage("migrate", "--noinput")
    server.manage(
        "shell",
        "-c",
        (
            "from django.contrib.auth.models import User; "
            f"User.objects.create_user('mira', password='{PASSWORD}'); "
            f"User.objects.create_user('kael', password='{PASSWORD}')"
        ),
    )
    server.start()
    yield server
    server.stop()


@pytest.fixture
def server_page(browser, compose_server):
    context = browser.new_context(base_url=compose_server.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.console_errors = []
    page.static_responses = []
    page.on("console", lambda m: page.console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: page.console_errors.append(str(exc)))
    page.on("response", lambda r: page.static_responses.append(r) if "/static/" in r.url else None)
    yield page
    context.close()


def log_in(page, username: str, password: str):
    page.goto("/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    with page.expect_navigation() as navigation:
        page.click("button[type=submit]")
    return navigation.value


def assert_styled_and_scripted(page) -> None:
    """The stylesheet applied (the top bar's colour), studio.js ran (html.js) and htmx is loaded."""
    assert page.evaluate("getComputedStyle(document.querySelector('.topbar')).backgroundColor") == "rgb(29, 35, 48)"
    assert page.evaluate("document.documentElement.classList.contains('js')")
    assert page.evaluate("typeof window.htmx === 'object' && typeof htmx.ajax === 'function'")


def test_gunicorn_with_debug_off_serves_hashed_compressed_static_files(server_page, compose_server):
    page = server_page
    response = page.goto("/accounts/login/")
    assert response.status == 200
    assert "default-src 'self'" in response.headers["content-security-policy"]
    assert_styled_and_scripted(page)

    by_kind = {}
    for static in page.static_responses:
        path = static.url.split("?")[0]
        assert static.status == 200, f"{static.status} {static.url}"
        for kind, name in (("css", "/css/studio."), ("js", "/js/studio."), ("htmx", "/django_htmx/htmx-2.min.")):
            if name in path:
                by_kind[kind] = static
    assert set(by_kind) == {"css", "js", "htmx"}, [r.url for r in page.static_responses]
    for kind, static in by_kind.items():
        # Hashed names, cached for good, sent gzip-compressed to a browser that accepts it.
        assert HASHED.search(static.url.split("?")[0]), static.url
        assert "immutable" in static.headers["cache-control"], (kind, static.headers)
        assert static.headers.get("content-encoding") == "gzip", (kind, static.headers)
    assert not page.console_errors, page.console_errors

    # The plain name works too (a stale link), and an unknown file is a 404, not a page.
    assert httpx.get(f"{compose_server.url}/static/css/studio.css").status_code == 200
    assert httpx.get(f"{compose_server.url}/static/css/nope.css").status_code == 404
    # The favicon redirect points at the hashed icon, which is served.
    icon = httpx.get(f"{compose_server.url}/favicon.ico", follow_redirects=True)
    assert icon.status_code == 200 and re.search(r"favicon\.[0-9a-f]{12}\.ico$", str(icon.url))


def test_htmx_works_on_the_compose_server(server_page, compose_server):
    """Log in through the form, create a token, revoke it with htmx (a swap, not a reload)."""
    compose_server.manage("axes_reset")
    page = server_page
    assert log_in(page, "mira", PASSWORD).status == 200
    page.goto("/accounts/tokens/")
    assert_styled_and_scripted(page)
    page.fill("#token-name", "engine")
    page.click("text=Create token")
    page.wait_for_selector("#new-token")
    page.click("#token-table button:has-text('Revoke')")
    page.wait_for_selector("#token-table td:has-text('revoked')")
    # The notice of the created key is still there: the table was swapped, the page not reloaded.
    assert page.is_visible("#new-token")
    assert not page.console_errors, page.console_errors


def test_login_lockout_holds_across_gunicorn_workers(server_page, compose_server):
    """Two workers, one count (in the database): the fifth failure locks, the right password is refused."""
    compose_server.manage("axes_reset")
    page = server_page
    for _ in range(4):
        response = log_in(page, "kael", "wrong")
        assert response.status == 200
        assert page.is_visible("text=Your username and password didn't match")
    response = log_in(page, "kael", "wrong")
    assert response.status == 429
    assert page.is_visible("text=Too many failed logins")
    assert page.is_visible("text=Try again in 15 minutes")
    assert_styled_and_scripted(page)  # the lockout page is a styled studio page

    response = log_in(page, "kael", PASSWORD)
    assert response.status == 429
    assert "sessionid" not in {c["name"] for c in page.context.cookies()}

    # An administrator unlocks (`manage.py axes_reset`, or the admin's Access attempts).
    compose_server.manage("axes_reset_username", "kael")
    compose_server.manage("axes_reset")
    response = log_in(page, "kael", PASSWORD)
    assert response.status == 200
    assert page.url.rstrip("/") == compose_server.url
    assert page.is_visible("text=kael")
    assert not [e for e in page.console_errors if "429" not in e], page.console_errors
