"""GET /api/v1/docs: Swagger UI on the generated document, from the studio's own static files, under the self-only CSP."""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.staticfiles import finders
from django.test import Client

from tests.support.api_errors import error_code

pytestmark = pytest.mark.django_db


def test_the_docs_page_loads_only_own_static_files(playtester):
    client = Client()
    client.force_login(playtester)
    response = client.get("/api/v1/docs")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    policy = response["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "style-src 'self'" in policy
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert sources and all(src.startswith("/static/") for src in sources), sources
    for src in sources:  # each is a file the studio serves itself (django-ninja's wheel ships them)
        assert finders.find(src.removeprefix("/static/")), src
    assert "/static/ninja/swagger-ui-bundle.js" in sources and "/static/ninja/swagger-ui-init.js" in sources
    # No inline script a self-only CSP would block: the only <script> without src is JSON data.
    inline = re.findall(r"<script(?![^>]*\bsrc=)([^>]*)>(.*?)</script>", html, re.S)
    assert [attrs.strip() for attrs, _ in inline] == ['type="application/json" id="swagger-settings"']
    settings = json.loads(inline[0][1])
    assert settings["url"] == "/api/v1/openapi.json"
    assert client.get(settings["url"]).status_code == 200
    csrf = re.search(r'data-csrf-token="([^"]+)"', html)
    assert csrf and csrf.group(1)  # "Try it out" can write with the session


def test_the_docs_page_needs_credentials():
    response = Client().get("/api/v1/docs")
    assert response.status_code == 401 and error_code(response) == "not_authenticated"
