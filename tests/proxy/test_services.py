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
    answer = LLMResponse(text="The tide turns.", model="local", prompt_tokens=120, completion_tokens=9,
                         latency_ms=850, finish_reason="stop", first_token_ms=42, **response)
    return SimpleNamespace(response=answer, error=error, cancelled=cancelled)


def test_a_finished_answer_fills_the_alternative_as_the_console_does(game_save):
    """The mapping is the console's (`answer_values`): the time to the first text is kept too."""
    alternative = narrator_draft_create(game_save=game_save, player_input="Wait.").alternatives.get()
    proposal_finish(alternative_id=alternative.pk, relay=_relay())
    alternative = NarratorAlternative.objects.get(pk=alternative.pk)
    assert (alternative.status, alternative.text, alternative.model, alternative.finish_reason) == (
        AlternativeStatus.DONE, "The tide turns.", "local", "stop")
    assert (alternative.latency_ms, alternative.prompt_tokens, alternative.completion_tokens) == (850, 120, 9)
    assert alternative.first_token_ms == 42  # the proxy dropped it before
