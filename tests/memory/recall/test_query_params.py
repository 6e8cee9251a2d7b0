"""One parameters object for search and context: one set of limits; recording is a POST.

The API, the search playground and the Context viewer build a `SearchParams` /
`ContextParams` and so accept and refuse the same values. A GET never writes: "Record for
lore replay" is a POST with its CSRF token (and the playtester role) on the pages, and
`record=true` on an API GET is a 400.
"""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from studio.memory.models import RecordedQuery
from studio.memory.recall.query_params import LIMITS, ContextParams, InvalidParameters, SearchParams

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def chunks(vector_memory, game_save):
    vector_memory.embed_chunks(
        game_save.save_id,
        [
            {"turn_id": 1, "text": "Kaël docks at Port Vey with a hold of contraband."},
            {"turn_id": 2, "text": "Mira lends Kaël ten silver crowns."},
        ],
    )
    return game_save


def page(name, game_save):
    return reverse(f"memory:{name}", args=[game_save.save_id])


def test_params_objects_list_every_field_out_of_its_limits():
    with pytest.raises(InvalidParameters) as caught:
        ContextParams(query_text="x" * (LIMITS.query_text_chars + 1), token_budget=0, k_narrative=101, k_lore=True)
    assert set(caught.value.errors) == {"query_text", "token_budget", "k_narrative", "k_lore"}
    with pytest.raises(InvalidParameters) as caught:
        SearchParams(query_text="  ", k=0, max_turn_id=-1, focus_terms=["x" * 201])
    assert set(caught.value.errors) == {"query_text", "k", "max_turn_id", "focus_terms"}
    assert ContextParams(focus_terms=" Kaël , ,Mira").focus_terms == ("Kaël", "Mira")


def test_pages_and_api_accept_and_refuse_the_same_values(client, playtester, chunks, make_api):
    client.force_login(playtester)
    api = make_api(playtester)
    long_query = "silver crowns " * 250  # 3,500 characters: the pages used to stop at 2,000
    wide = {"q": long_query, "k": 80}
    assert client.get(page("playground", chunks), wide).context["form"].is_valid()
    assert api.post(f"/api/v1/saves/{chunks.save_id}/query", {"query_text": long_query, "k": 80}).status_code == 200
    context_form = client.get(page("context", chunks), {"q": "crowns", "budget": 5, "k_narrative": 80}).context["form"]
    assert context_form.is_valid(), context_form.errors  # the page's budget used to start at 10, k at 50
    assert (
        api.post(
            f"/api/v1/saves/{chunks.save_id}/context", {"query_text": "crowns", "token_budget": 5, "k_narrative": 80}
        ).status_code
        == 200
    )
    too_long = "x" * (LIMITS.query_text_chars + 1)
    assert not client.get(page("playground", chunks), {"q": too_long}).context["form"].is_valid()
    assert api.post(f"/api/v1/saves/{chunks.save_id}/query", {"query_text": too_long}).status_code == 400
    refused = client.get(page("context", chunks), {"q": "crowns", "budget": LIMITS.token_budget_max + 1}).context[
        "form"
    ]
    assert "budget" in refused.errors
    assert (
        api.post(f"/api/v1/saves/{chunks.save_id}/context", {"token_budget": LIMITS.token_budget_max + 1}).status_code
        == 400
    )


def test_a_get_never_records(client, playtester, chunks, make_api):
    client.force_login(playtester)
    client.get(page("playground", chunks), {"q": "silver crowns", "record": "on"})
    client.get(page("context", chunks), {"q": "silver crowns", "record": "on"})
    api = make_api(playtester)
    for endpoint, body in (
        ("query", {"query_text": "crowns", "record": "true"}),
        ("context", {"query_text": "crowns", "record": "true"}),
    ):
        response = api.get(f"/api/v1/saves/{chunks.save_id}/{endpoint}", body)
        assert response.status_code == 400 and "record" in response.json()["error"]["details"]
    assert not RecordedQuery.objects.exists()


@pytest.mark.parametrize("name, source", [("playground", "playground"), ("context", "context")])
def test_recording_is_a_post_with_its_csrf_token(playtester, chunks, name, source):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(playtester)
    html = browser.get(page(name, chunks), {"q": "silver crowns"}).content.decode()
    record_url = page(f"{name}_record", chunks)
    assert f'action="{record_url}"' in html and 'name="csrfmiddlewaretoken"' in html
    assert browser.post(record_url, {"q": "silver crowns"}).status_code == 403  # no token
    assert not RecordedQuery.objects.exists()
    token = browser.cookies["csrftoken"].value
    fragment = browser.post(record_url, {"q": "silver crowns", "csrfmiddlewaretoken": token}, **HX)
    assert fragment.status_code == 200 and "<html" not in fragment.content.decode()
    assert "recorded" in fragment.content.decode().lower()
    plain = browser.post(record_url, {"q": "silver crowns", "csrfmiddlewaretoken": token})
    assert plain.status_code == 302 and plain["Location"].startswith(page(name, chunks) + "?")
    assert "q=silver+crowns" in plain["Location"]
    rows = RecordedQuery.objects.filter(game_save=chunks)
    assert rows.count() == (2 if name == "playground" else 4)
    assert {r.params["source"] for r in rows} == {source}


def test_recording_needs_the_playtester_role(client, universe, chunks):
    from django.contrib.auth.models import User

    reader = User.objects.create_user("reader", password="pw")
    universe.members.add(reader)
    client.force_login(reader)
    for name in ("playground", "context"):
        assert client.post(page(f"{name}_record", chunks), {"q": "silver crowns"}).status_code == 403
        html = client.get(page(name, chunks), {"q": "crowns"}).content.decode()
        assert page(f"{name}_record", chunks) not in html  # no Record button for a reader
    assert not RecordedQuery.objects.exists()
