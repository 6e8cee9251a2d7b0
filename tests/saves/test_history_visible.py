"""History visible (issue 30): a turn page lists the model calls of earlier versions of the turn,
labelled; the rewind preview shows the first lines of each turn it removes."""

from __future__ import annotations

import pytest
from django.urls import reverse

from studio.memory.models import Job, JobKind, JobStatus, LLMCall
from studio.saves.narrator import play
from studio.saves.services import turn_append

pytestmark = pytest.mark.django_db


def call_for_turn(game_save, turn_id: int, answer: str) -> LLMCall:
    """A done living job of the turn as it stands now, with one call (what a living job leaves)."""
    from studio.memory.jobs.timeline import EVENT_KEY

    event = game_save.events.get(turn_id=turn_id)
    job = Job.objects.create(
        kind=JobKind.LIVING_TURN,
        universe_id=game_save.universe_id,
        game_save=game_save,
        turn_id=turn_id,
        timeline_generation=game_save.timeline_generation,
        status=JobStatus.DONE,
        payload={EVENT_KEY: event.pk},
    )
    return LLMCall.objects.create(
        game_save=game_save, job=job, operation="extract", model="m", request="{}", answer=answer
    )


def test_a_turn_page_lists_the_calls_of_earlier_versions_labelled(tester, game_save, eager_jobs, vector_memory):
    call_for_turn(game_save, 3, "first version's facts")
    call_for_turn(game_save, 2, "turn 2's facts")
    play.last_turn_undo(game_save=game_save, expected_turn=3)
    turn_append(game_save=game_save, player_input="again", narrative="Turn 3, played again.")
    call_for_turn(game_save, 3, "second version's facts")
    html = tester.get(reverse("saves:turn_detail", args=[game_save.save_id, 3])).content.decode()
    assert "Calls to the language model (1, and 1 for earlier versions of this turn)" in html
    current, earlier = html.split('id="llm-calls-earlier"')
    assert "second version&#x27;s facts" in current and "first version" not in current
    assert "first version&#x27;s facts" in earlier and "earlier version 1" in earlier
    # A turn kept by the rewind keeps its calls as its own (its done job stays on the old generation).
    html = tester.get(reverse("saves:turn_detail", args=[game_save.save_id, 2])).content.decode()
    assert "Calls to the language model (1)" in html and "turn 2&#x27;s facts" in html


def test_the_rewind_preview_shows_the_start_of_each_turn_it_removes(tester, game_save):
    html = tester.get(
        reverse("saves:rewind_preview", args=[game_save.save_id]), {"turn": 1}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "Turns that go: 2 to 3" in html
    assert html.index("Turn 3 text.") < html.index("Turn 2 text.")  # newest first
    assert 'data-turn="1"' not in html.split('id="rewind-removed-turns"')[1].split("</ol>")[0]
