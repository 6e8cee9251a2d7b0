"""How a relayed answer ends on its proposal (`proposal_finish`)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from studio.memory.llm import LLMResponse
from studio.proxy.services import proposal_finish
from studio.saves.models import AlternativeStatus, NarratorAlternative
from studio.saves.narrator.services import narrator_draft_create

pytestmark = pytest.mark.django_db


def _relay(*, cancelled=False, error=None, **response):
    answer = LLMResponse(
        text="The tide turns.",
        model="local",
        prompt_tokens=120,
        completion_tokens=9,
        latency_ms=850,
        finish_reason="stop",
        first_token_ms=42,
        **response,
    )
    return SimpleNamespace(response=answer, error=error, cancelled=cancelled)


def test_a_finished_answer_fills_the_alternative_as_the_console_does(game_save):
    """The mapping is the console's (`answer_values`): the time to the first text is kept too."""
    alternative = narrator_draft_create(game_save=game_save, player_input="Wait.").alternatives.get()
    proposal_finish(alternative_id=alternative.pk, relay=_relay())
    alternative = NarratorAlternative.objects.get(pk=alternative.pk)
    assert (alternative.status, alternative.text, alternative.model, alternative.finish_reason) == (
        AlternativeStatus.DONE,
        "The tide turns.",
        "local",
        "stop",
    )
    assert (alternative.latency_ms, alternative.prompt_tokens, alternative.completion_tokens) == (850, 120, 9)
    assert alternative.first_token_ms == 42  # the proxy dropped it before


def test_the_memory_budget_is_the_universes_unless_the_front_end_asks_for_another(universe, vector_memory):
    """Without `axiom_memory_tokens` the proxy plans the memory at the narrator's budget, the universe's
    `context_budget` when it sets one; a number the front end sends wins."""
    from studio.proxy.services import memory_budget, proxy_prepare
    from studio.world.models import Save, UniverseMeta

    assert memory_budget(None, universe_meta={}) == 2000
    assert memory_budget("not a number", universe_meta={"context_budget": "6000"}) == 6000
    assert memory_budget("300", universe_meta={"context_budget": "6000"}) == 300

    game_save = Save.objects.create(universe=universe, name="Proxy budget")

    def prepared_budget(**body):
        body = {"model": "story", "messages": [{"role": "user", "content": "I ask about Kaël."}], **body}
        prepared = proxy_prepare(game_save=game_save, body=body, upstream_model="story", vector_memory=vector_memory)
        assert "axiom_memory_tokens" not in prepared.body
        return prepared.memory.token_budget

    assert prepared_budget() == 2000
    UniverseMeta.objects.create(universe=universe, key="context_budget", value="6000")
    assert prepared_budget() == 6000
    assert prepared_budget(axiom_memory_tokens=700) == 700
