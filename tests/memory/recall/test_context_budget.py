"""The narrator's memory context budget per universe: `context_budget` (Universe_Meta, tokens).

Unset, the narrator plans its memory at the built-in 2,000 tokens; set, the prompt's memory
context, impersonation's window (tests/saves/test_play_controls.py) and the memory proxy's
default (tests/proxy/test_services.py) all use the universe's value. The meta page refuses a
bad value (tests/universes/test_meta_views.py).
"""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from studio.memory.recall.policy import DEFAULT_CONTEXT_BUDGET, context_budget_from_meta
from studio.saves.narrator.prompt import CONFIG, build_narrator_prompt, check_player_input, narrator_budget
from studio.universes.meta_keys import BUDGET, KNOWN_BY_KEY
from studio.world.models import UniverseMeta
from studio.universes.services import meta_validate
from tests.plugins.demo import QUESTION

CONTEXT_BUDGET_META = "context_budget"

pytestmark = pytest.mark.django_db


def _set_budget(universe, value: str) -> None:
    UniverseMeta.objects.update_or_create(universe=universe, key=CONTEXT_BUDGET_META, defaults={"value": value})


def test_the_budget_is_read_from_meta_and_unset_or_out_of_bounds_is_the_built_in_one():
    assert CONTEXT_BUDGET_META == "context_budget" and DEFAULT_CONTEXT_BUDGET == CONFIG.token_budget == 2000
    assert context_budget_from_meta({}) == 2000 and narrator_budget({}) == 2000
    assert context_budget_from_meta({"context_budget": " 8000 "}) == 8000
    assert narrator_budget({"context_budget": "600"}) == 600
    # Written before validation or by hand in the database: ignored, as an invalid share is.
    for bad in ("150", "100001", "lots", ""):
        assert context_budget_from_meta({"context_budget": bad}) == 2000, bad
    assert context_budget_from_meta({}, default=1234) == 1234
    assert check_player_input("I wait", universe_meta={"context_budget": "4096"}).token_budget == 4096
    assert check_player_input("I wait").token_budget == 2000


def test_meta_validate_keeps_a_budget_in_bounds_and_refuses_the_rest():
    assert meta_validate(key="context_budget", value=" 8000 ") == "8000"
    assert meta_validate(key="context_budget", value="200") == "200"
    with pytest.raises(ValidationError, match="between 200 and 100000") as low:
        meta_validate(key="context_budget", value="20")
    assert "tokens of memory the narrator" in str(low.value)
    with pytest.raises(ValidationError, match="between 200 and 100000"):
        meta_validate(key="context_budget", value="100001")
    with pytest.raises(ValidationError, match="is a whole number"):
        meta_validate(key="context_budget", value="8k")


def test_the_metadata_table_explains_the_budget_in_the_budget_group():
    known = KNOWN_BY_KEY["context_budget"]
    assert known.group == BUDGET == "Memory context budget" and known.default == "2000"
    assert "instructions" in known.help and "answer" in known.help  # what the model's context must also hold


def test_the_narrators_prompt_plans_its_memory_at_the_universes_budget(demo):
    """The same action at three budgets: the memory context is planned at each, and what fits follows it."""

    def memory():
        return build_narrator_prompt(game_save=demo, player_input=QUESTION).memory

    default = memory()
    assert default.token_budget == 2000 and default.as_dict()["token_budget"] == 2000
    _set_budget(demo.universe, "600")
    small = memory()
    assert small.token_budget == 600 and small.used_tokens <= 600
    assert len(small.included) < len(default.included)
    assert len(small.shown_turns) < len(default.shown_turns)  # the recent turns' share of it holds fewer
    _set_budget(demo.universe, "8000")
    large = memory()
    assert large.token_budget == 8000 and large.used_tokens > default.used_tokens
    assert len(large.included) > len(default.included) and len(large.shown_turns) >= len(default.shown_turns)


def test_a_narrators_prompt_reads_the_universes_meta_once(demo):
    """The instructions, the budget and the memory context share one read; the lore activation has its own."""
    _set_budget(demo.universe, "3000")
    with CaptureQueriesContext(connection) as queries:
        prompt = build_narrator_prompt(game_save=demo, player_input=QUESTION)
    reads = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith("SELECT") and 'FROM "universes_universemeta"' in q["sql"]
    ]
    assert prompt.memory.token_budget == 3000
    assert len(reads) == 2, reads  # it was three (the prompt's meta, the context's, the activation's)


def test_the_context_viewer_starts_at_the_narrators_budget(client, playtester, game_save, vector_memory):
    """An empty budget field means the narrator's budget: the built-in one, then the universe's; a given one wins."""
    client.force_login(playtester)
    url = reverse("memory:context", args=[game_save.save_id])
    page = client.get(url, {"q": "Kaël asks Mira about the loan", "budget": ""}).content.decode()
    assert f"of {DEFAULT_CONTEXT_BUDGET} tokens used" in page
    _set_budget(game_save.universe, "3500")
    page = client.get(url, {"q": "Kaël asks Mira about the loan", "budget": ""}).content.decode()
    assert "of 3500 tokens used" in page and 'value="3500"' not in page  # the field stays empty, its default says it
    assert "the narrator's own, 3500 tokens" in page
    assert 'name="budget" value="3500"' in client.get(url).content.decode()  # an unbound form starts at it
    assert "of 40 tokens used" in client.get(url, {"q": "Kaël", "budget": 40}).content.decode()
