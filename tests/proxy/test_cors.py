"""CORS on the memory proxy, for front ends that call it from the browser: off by default, then
only for the origins AXIOM_PROXY_CORS_ORIGINS lists."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

from tests.llm_server import Reply
from tests.proxy.frontends import sillytavern

pytestmark = pytest.mark.django_db

RISU = "https://risu.example"


def preflight(path: str, origin: str, asked: str = "authorization,content-type"):
    return Client().options(
        path,
        headers={"Origin": origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": asked},
    )


def test_no_cors_headers_unless_configured(proxy):
    response = proxy.get("/v1/models", headers={"Origin": RISU})
    assert response.status_code == 200 and "Access-Control-Allow-Origin" not in response
    assert preflight("/v1/chat/completions", RISU).status_code == 401  # no key, no preflight answer


@override_settings(AXIOM_PROXY_CORS_ORIGINS=[RISU])
def test_an_allowed_origin_gets_its_preflight_and_every_answer(proxy, make_api, upstream, play_save):
    response = preflight("/v1/chat/completions", RISU, asked="authorization,content-type,x-axiom-save")
    assert response.status_code == 204 and response["Access-Control-Allow-Origin"] == RISU
    assert response["Access-Control-Allow-Methods"] == "POST, OPTIONS"
    assert response["Access-Control-Allow-Headers"] == "authorization,content-type,x-axiom-save"
    assert "Access-Control-Allow-Credentials" not in response and "Origin" in response["Vary"]
    # Errors reach the page too (it shows the OpenAI error to the player).
    refused = make_api(None).get("/v1/models", headers={"Origin": RISU})
    assert refused.status_code == 401 and refused["Access-Control-Allow-Origin"] == RISU
    assert "WWW-Authenticate" in refused["Access-Control-Expose-Headers"]
    upstream.reply = Reply(content="The tide is out.")
    answer = proxy.post(
        "/v1/chat/completions", sillytavern(f"axiom/{play_save.save_id}", [], "Look around."), headers={"Origin": RISU}
    )
    assert answer.status_code == 200, answer.content
    assert answer["Access-Control-Allow-Origin"] == RISU and "X-Axiom-Memory" in answer["Access-Control-Expose-Headers"]


@override_settings(AXIOM_PROXY_CORS_ORIGINS=[RISU])
def test_another_origin_gets_no_cors_headers(proxy):
    assert preflight("/v1/models", "https://evil.example").status_code == 401
    response = proxy.get("/v1/models", headers={"Origin": "https://evil.example"})
    assert response.status_code == 200 and "Access-Control-Allow-Origin" not in response


@override_settings(AXIOM_PROXY_CORS_ORIGINS=["*"])
def test_a_star_allows_any_origin_without_credentials(proxy):
    response = proxy.get("/v1/models", headers={"Origin": "https://anywhere.example"})
    assert response["Access-Control-Allow-Origin"] == "https://anywhere.example"
    assert "Access-Control-Allow-Credentials" not in response
