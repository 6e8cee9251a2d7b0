"""The API's context response carries the explain for every lore entry, as the OpenAPI document says."""
from __future__ import annotations

import pytest

from studio.api.openapi import build_openapi
from tests.api.test_openapi import schema_validator
from tests.plugins.demo import QUESTION

pytestmark = pytest.mark.django_db


def test_context_response_explains_every_entry(demo, make_api, playtester):
    demo.universe.members.add(playtester)
    # The context endpoint assembles what the narrator reads, the story so far included (docs/long-play.md):
    # the demo's recent turns and the lore their text activates now share the budget ahead of lore found
    # by meaning (the last layer), so at the default (1,200), the narrator's (2,000) or even 8,000 the
    # entry is left out over budget. Ask for room enough that nothing is cut: this test is about the
    # explain, not the budget (tests/memory/recall/test_context_lore.py covers the budget rules).
    response = make_api(playtester).post(f"/api/v1/saves/{demo.save_id}/context",
                                         {"query_text": QUESTION, "token_budget": 20_000})
    assert response.status_code == 200
    body = response.json()
    explain = {r["entry_id"]: r for r in body["lore_explain"]}
    assert set(explain) == set(demo.universe.lore_entries.values_list("entry_id", flat=True))
    hesper = explain["hesper-vale"]
    assert hesper["included"] and hesper["activated"] and hesper["reasons"][0] == "matched key “Hesper” in the pending input"
    assert explain["copper-hood"]["included"] and explain["copper-hood"]["semantic_rank"] is not None
    assert body["shares"]["narrative"] == 40
    schemas = build_openapi()["components"]["schemas"]
    assert set(schemas["LoreExplanation"]["required"]) <= set(hesper) <= set(schemas["LoreExplanation"]["properties"])
    assert set(body) <= set(schemas["MemoryContext"]["properties"])
    schema_validator("MemoryContext").validate(body)
