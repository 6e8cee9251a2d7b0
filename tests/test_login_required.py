"""Every studio URL requires a login: an anonymous visitor is sent to the login page.

The test walks the URL configuration itself, so a new view is covered the moment it is
added; a new URL parameter name must be taught to `sample_kwargs` (the test fails until it is).
"""

from __future__ import annotations

import pytest
from django.contrib.staticfiles import finders
from django.templatetags.static import static
from django.urls import URLPattern, URLResolver, get_resolver

# URLs that are public on purpose.
PUBLIC = {"login", "logout", "healthz", "favicon"}
# API endpoints (the JSON API and the memory proxy) answer 401 JSON instead of redirecting to a login page.
API_PREFIX = ("api/", "v1/")


def walk(patterns, prefix=""):
    for entry in patterns:
        if isinstance(entry, URLResolver):
            if str(entry.pattern).startswith("admin/"):
                continue  # the admin has its own login (covered by Django's tests and ours)
            yield from walk(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern), entry


def sample_kwargs(route: str, pattern: URLPattern, universe, game_save) -> dict | None:
    converters = pattern.pattern.converters
    values = {}
    for name in converters:
        if name in {"slug", "universe_slug"}:
            values[name] = universe.slug
        elif name == "save_id":
            values[name] = game_save.save_id
        elif name == "entry_id":
            values[name] = "kael"
        elif name in {
            "turn_id",
            "turn",
            "pk",
            "id",
            "job_id",
            "fact_id",
            "observation_id",
            "model_id",
            "revision_id",
            "token_id",
            "draft_id",
            "number",
            "chapter_id",
            "reveal_id",
        }:
            values[name] = 1
        elif name in {"subject", "name", "test_name"}:
            values[name] = "kael"
        else:
            return None
    return values


def all_routes():
    resolver = get_resolver()
    return [(route, pattern) for route, pattern in walk(resolver.url_patterns)]


@pytest.mark.django_db
def test_every_non_public_url_requires_login(client, universe, game_save):
    checked = 0
    unknown = []
    for route, pattern in all_routes():
        if pattern.name in PUBLIC:
            continue
        kwargs = sample_kwargs(route, pattern, universe, game_save)
        if kwargs is None:
            unknown.append(route)
            continue
        path = "/" + route
        for name, value in kwargs.items():
            path = (
                path.replace(f"<slug:{name}>", str(value))
                .replace(f"<str:{name}>", str(value))
                .replace(f"<int:{name}>", str(value))
                .replace(f"<{name}>", str(value))
                .replace(f"<path:{name}>", str(value))
            )
        for method in ("get", "post"):
            response = getattr(client, method)(path)
            if route.startswith(API_PREFIX):
                assert response.status_code == 401, f"{method.upper()} {path}: {response.status_code}"
            else:
                assert response.status_code in (302, 405), f"{method.upper()} {path}: {response.status_code}"
                if response.status_code == 302:
                    assert response["Location"].startswith("/accounts/login/"), f"{path} -> {response['Location']}"
            checked += 1
    assert not unknown, f"teach sample_kwargs these URL parameters: {unknown}"
    assert checked >= 4


def test_login_page_and_health_are_public(client, db):
    assert client.get("/accounts/login/").status_code == 200
    assert client.get("/healthz").json() == {"status": "ok"}
    favicon = client.get("/favicon.ico")  # browsers ask for it on every page, logged in or not
    assert favicon.status_code == 302 and favicon["Location"] == static("favicon.ico")
    with open(finders.find("favicon.ico"), "rb") as icon:
        assert icon.read(4) == b"\x00\x00\x01\x00"  # an ICO header


def test_logged_in_user_sees_the_home_page(client, author, universe):
    client.force_login(author)
    response = client.get("/")
    assert response.status_code == 200
    assert "Test World" in response.content.decode()


def test_user_sees_only_universes_they_belong_to(client, outsider, universe):
    client.force_login(outsider)
    assert "Test World" not in client.get("/").content.decode()
    assert client.get(f"/universes/{universe.slug}/").status_code == 404
