"""The Console's Stop keeps the text the player saw, up to what a turn may hold (studio/limits.py).

Before, the view cut the shown text to 20,000 characters while a turn holds 200,000: a long
narration stopped late lost its end, silently. Now the text is kept whole up to the turn's
narrative limit (without NUL, which no turn may hold), so the stopped text can be accepted.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from studio import limits
from studio.saves.models import AlternativeStatus, NarratorAlternative, NarratorDraft
from studio.world.models import Event

pytestmark = pytest.mark.django_db


def stop(client, game_save, shown_text: str) -> NarratorAlternative:
    draft = NarratorDraft.objects.create(game_save=game_save, turn_id=game_save.current_turn + 1, player_input="go")
    alternative = NarratorAlternative.objects.create(draft=draft, number=1, status=AlternativeStatus.STREAMING)
    client.post(reverse("saves:narrator_stop", args=[game_save.save_id, draft.pk, 1]), {"shown_text": shown_text})
    alternative.refresh_from_db()
    assert alternative.status == AlternativeStatus.CANCELLED
    return alternative


def test_a_long_stopped_narration_is_kept_whole_and_can_be_accepted(client, playtester, game_save):
    client.force_login(playtester)
    shown = "The tide turns. " * 3000  # 48,000 characters
    alternative = stop(client, game_save, shown)
    assert alternative.text == shown.strip()
    client.post(
        reverse("saves:narrator_accept", args=[game_save.save_id, alternative.draft_id]),
        {"number": "1", "narrative": alternative.text},
    )
    assert Event.objects.get(game_save=game_save, turn_id=4).narrative == shown.strip()


def test_a_stopped_text_is_kept_to_a_turns_limit_without_nul(client, playtester, game_save):
    client.force_login(playtester)
    limit = limits.TURN_NARRATIVE.max_chars
    alternative = stop(client, game_save, "a\x00b" + "x" * limit)
    assert len(alternative.text) == limit and "\x00" not in alternative.text
    assert not limits.TURN_NARRATIVE.problem(alternative.text)
