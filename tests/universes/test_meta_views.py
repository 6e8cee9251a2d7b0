"""Universe_Meta page: inline editing and validation of known keys."""

from __future__ import annotations

import json

import pytest

from studio.world.models import UniverseMeta

pytestmark = pytest.mark.django_db


def meta_url(universe, suffix=""):
    return f"/universes/{universe.slug}/meta/{suffix}"


def test_page_and_fragment(author_client, htmx, universe):
    page = author_client.get(meta_url(universe)).content.decode()
    assert "<html" in page and "belief_mission" in page and "Remember debts." in page
    fragment = author_client.get(meta_url(universe), **htmx).content.decode()
    assert fragment.strip().startswith('<div id="meta-table">') and "<html" not in fragment


def test_the_page_reads_the_meta_rows_once(author_client, universe):
    """The persona and the `?key=` form use the rows the table shows (they each read them again)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        page = author_client.get(meta_url(universe), {"key": "belief_mission"}).content.decode()
    assert 'value="belief_mission"' in page and "Remember debts." in page
    reads = [q["sql"] for q in queries if q["sql"].startswith("SELECT") and 'FROM "universes_universemeta"' in q["sql"]]
    assert len(reads) == 1, reads


def test_add_key_htmx_and_no_js(author_client, htmx, universe):
    response = author_client.post(meta_url(universe, "save/"), {"key": "tone", "value": "grim"}, **htmx)
    assert "Saved “tone”" in response.content.decode() and "<html" not in response.content.decode()
    response = author_client.post(meta_url(universe, "save/"), {"key": "era", "value": "1800s"})
    assert response.status_code == 302
    assert dict(universe.meta.values_list("key", "value"))["era"] == "1800s"


def test_belief_missions_must_be_a_json_object(author_client, htmx, universe):
    response = author_client.post(meta_url(universe, "save/"), {"key": "belief_missions", "value": "[1, 2]"}, **htmx)
    html = response.content.decode()
    assert "must be a JSON object" in html and response["HX-Retarget"] == "#meta-add"
    response = author_client.post(meta_url(universe, "save/"), {"key": "belief_missions", "value": "{not json"})
    assert response.status_code == 400 and "must be JSON" in response.content.decode()
    response = author_client.post(meta_url(universe, "save/"), {"key": "belief_missions", "value": '{"Kaël": 3}'})
    assert "the mission must be text" in response.content.decode()
    response = author_client.post(meta_url(universe, "save/"), {"key": "belief_missions", "value": '{"A:B": "x"}'})
    assert "may not contain a colon" in response.content.decode()
    assert not universe.meta.filter(key="belief_missions").exists()
    author_client.post(
        meta_url(universe, "save/"), {"key": "belief_missions", "value": '{"Kaël":  "Remembers   debts."}'}
    )
    assert json.loads(universe.meta.get(key="belief_missions").value) == {"Kaël": "Remembers debts."}


def test_bad_key_names_are_refused(author_client, universe):
    response = author_client.post(meta_url(universe, "save/"), {"key": "has space", "value": "x"})
    assert response.status_code == 400 and "letters, digits" in response.content.decode()


def test_belief_mission_is_text_with_limit(author_client, universe):
    response = author_client.post(meta_url(universe, "save/"), {"key": "belief_mission", "value": "x" * 5000})
    assert response.status_code == 400 and "at most 4000" in response.content.decode()
    assert universe.meta.get(key="belief_mission").value == "Remember debts."


def test_inline_edit_row_and_rename_key(author_client, htmx, universe):
    row = universe.meta.get(key="belief_mission")
    fragment = author_client.get(meta_url(universe, f"{row.pk}/edit/"), **htmx).content.decode()
    assert fragment.strip().startswith(f'<tr id="meta-row-{row.pk}"') and "Remember debts." in fragment
    page = author_client.get(meta_url(universe, f"{row.pk}/edit/")).content.decode()
    assert "<html" in page and "Edit “belief_mission”" in page
    response = author_client.post(
        meta_url(universe, "save/"), {"row_id": row.pk, "key": "old_mission", "value": "v"}, **htmx
    )
    assert "old_mission" in response.content.decode()
    assert list(universe.meta.values_list("key", flat=True)) == ["old_mission"]


def test_inline_edit_error_retargets_row(author_client, htmx, universe):
    row = universe.meta.get(key="belief_mission")
    response = author_client.post(
        meta_url(universe, "save/"), {"row_id": row.pk, "key": "belief_missions", "value": "nope"}, **htmx
    )
    assert response["HX-Retarget"] == f"#meta-row-{row.pk}" and "must be JSON" in response.content.decode()
    assert universe.meta.get(pk=row.pk).key == "belief_mission"


def test_delete_key(author_client, htmx, universe):
    row = universe.meta.get(key="belief_mission")
    response = author_client.post(meta_url(universe, f"{row.pk}/delete/"), **htmx)
    html = response.content.decode()
    # A known key that is gone is still offered, as not set, with where it is set from.
    assert 'id="meta-key-belief_mission"' in html and "not set" in html and "No other keys yet" in html
    assert not UniverseMeta.objects.filter(pk=row.pk).exists()


def test_playtester_cannot_edit_meta(client, playtester, universe):
    client.force_login(playtester)
    assert client.post(meta_url(universe, "save/"), {"key": "x", "value": "y"}).status_code == 403
    row = universe.meta.get(key="belief_mission")
    assert client.get(meta_url(universe, f"{row.pk}/edit/")).status_code == 403
    assert client.post(meta_url(universe, f"{row.pk}/delete/")).status_code == 403


def test_the_context_budget_is_offered_and_a_bad_value_is_refused_with_nothing_written(author_client, htmx, universe):
    page = author_client.get(meta_url(universe)).content.decode()
    known = page.split('id="meta-key-context_budget"', 1)[1].split("</tr>", 1)[0]
    assert "Tokens of memory the narrator reads" in known and "play uses 2000" in known
    assert ">Memory context budget</th>" in page
    for bad, message in (
        ("20", "context_budget must be between 200 and 100000"),
        ("lots", "context_budget is a whole number"),
    ):
        response = author_client.post(meta_url(universe, "save/"), {"key": "context_budget", "value": bad}, **htmx)
        assert message in response.content.decode() and response["HX-Retarget"] == "#meta-add"
        response = author_client.post(meta_url(universe, "save/"), {"key": "context_budget", "value": bad})
        assert response.status_code == 400 and message in response.content.decode()
    assert not universe.meta.filter(key="context_budget").exists()
    # An edit of a good value to a bad one keeps the good one.
    author_client.post(meta_url(universe, "save/"), {"key": "context_budget", "value": " 8000 "})
    row = universe.meta.get(key="context_budget")
    assert row.value == "8000"
    response = author_client.post(
        meta_url(universe, "save/"), {"row_id": row.pk, "key": "context_budget", "value": "100001"}, **htmx
    )
    assert "between 200 and 100000" in response.content.decode()
    assert universe.meta.get(key="context_budget").value == "8000"
