"""The API's context response carries the explain for every lore entry, as the OpenAPI document says."""

from __future__ import annotations

import pytest

from studio.api.openapi import build_openapi
from tests.support.openapi import schema_validator
from tests.plugins.demo import QUESTION

pytestmark = pytest.mark.django_db


def test_context_response_explains_every_entry(demo, make_api, playtester):
    demo.universe.members.add(playtester)
    # At the context's default budget (the narrator's, 2,000: what the narrator reads), with the story so far
    # and the lore its recent turns activate competing, and the cap on what changes with each action: the
    # budget kept for what the action recalls still takes the entry asked about, found by meaning
    # (docs/long-play.md, "What the budget keeps for recall").
    response = make_api(playtester).post(f"/api/v1/saves/{demo.save_id}/context", {"query_text": QUESTION})
    assert response.status_code == 200
    body = response.json()
    explain = {r["entry_id"]: r for r in body["lore_explain"]}
    assert set(explain) == set(demo.universe.lore_entries.values_list("entry_id", flat=True))
    hesper = explain["hesper-vale"]
    assert (
        hesper["included"]
        and hesper["activated"]
        and hesper["reasons"][0] == "matched key “Hesper” in the pending input"
    )
    assert explain["copper-hood"]["included"] and explain["copper-hood"]["semantic_rank"] is not None
    assert body["token_budget"] == 2000 and body["shares"]["narrative"] == 100 and body["reserve_recall"] == 10
    assert body["cap_recall"] == 12 and body["policy"]["recent_turns"] == 10
    schemas = build_openapi()["components"]["schemas"]
    assert set(schemas["LoreExplanation"]["required"]) <= set(hesper) <= set(schemas["LoreExplanation"]["properties"])
    assert set(body) <= set(schemas["MemoryContext"]["properties"])
    schema_validator("MemoryContext").validate(body)
