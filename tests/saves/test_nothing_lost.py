"""Nothing lost (issue 30): no play control deletes an accepted turn without offering to put it
back; a discarded draft stays until the next turn is accepted; swipes never rewind; edited
turns are marked.

Against the scripted OpenAI-compatible server (tests/llm_server.py); the texts are the test's.
"""

from __future__ import annotations

import pytest

from studio.memory.models import Job, JobKind
from studio.saves.errors import TurnConflict
from studio.memory.models import RecordedQuery
from studio.saves.models import DraftStatus, NarratorAlternative, NarratorDraft, NarratorSnapshot, PlaySettings
from studio.world.models import Event
from studio.saves.narrator.snapshots import snapshot_prompt
from studio.saves.narrator import play, services
from studio.saves.services import turn_update_narrative
from tests.llm_server import Reply
from tests.plugins.narrator import STORY

from tests.support.save_urls import save_url

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
SECOND, THIRD = "Fog hides the quay.", "A gull lands on the ledger."


url = save_url


def three_alternatives(tester, game_save, narrator) -> Event:
    """Turn 4 narrated three times (STORY, SECOND, THIRD) and accepted with the first."""
    draft = services.narrator_draft_create(game_save=game_save, player_input="I wait")
    for number, text in ((1, STORY), (2, SECOND), (3, THIRD)):
        if number > 1:
            services.narrator_regenerate(draft=draft)
        narrator.reply = Reply(content=text)
        b"".join(tester.post(url("narrator_stream", game_save, draft.pk, number)).streaming_content)
    event = services.narrator_accept(draft=NarratorDraft.objects.get(pk=draft.pk), number=1)
    game_save.refresh_from_db()
    return event


def narrative(game_save, turn=4) -> str:
    return Event.objects.get(game_save=game_save, turn_id=turn).narrative


def test_swipes_browse_the_alternatives_in_place_and_back(tester, game_save, narrator):
    three_alternatives(tester, game_save, narrator)
    assert play.last_turn_swipes(game_save=game_save).__dict__ == {"count": 3, "position": 1, "numbers": [1, 2, 3]}
    for number, text in ((2, SECOND), (3, THIRD), (2, SECOND), (1, STORY)):
        html = tester.post(url("turn_swipe", game_save), {"expected_turn": 4, "number": number}, **HX).content.decode()
        game_save.refresh_from_db()
        assert game_save.current_turn == 4 and narrative(game_save) == text  # the turn stays, its text changes
        assert f"{number}/3" in html and 'id="save-current-turn" hx-swap-oob="true">4<' in html
    assert Event.objects.filter(game_save=game_save).count() == 4
    assert not Event.objects.get(game_save=game_save, turn_id=4).edited_at  # a swipe is not an edit
    assert Job.objects.filter(game_save=game_save, turn_id=4, kind=JobKind.EMBED_TURN).count() == 5  # re-embedded


def test_after_a_swipe_the_snapshot_describes_the_alternative_now_accepted(tester, game_save, narrator):
    # Alternative 2 was narrated with an author's note the first was not: what the narrator read differs.
    draft = services.narrator_draft_create(game_save=game_save, player_input="I wait")
    b"".join(tester.post(url("narrator_stream", game_save, draft.pk, 1)).streaming_content)
    PlaySettings.objects.create(game_save=game_save, authors_note="Keep the rain falling.", authors_note_depth=1)
    services.narrator_regenerate(draft=draft)
    narrator.reply = Reply(content=SECOND)
    b"".join(tester.post(url("narrator_stream", game_save, draft.pk, 2)).streaming_content)
    services.narrator_accept(draft=NarratorDraft.objects.get(pk=draft.pk), number=1)
    first, second = NarratorDraft.objects.get(pk=draft.pk).alternatives.order_by("number")
    recorded = RecordedQuery.objects.filter(game_save=game_save, turn_id=3, params__source="narrator")
    assert recorded.count() == len(first.context["queries"]) == 2

    def snapshot():
        return NarratorSnapshot.objects.get(game_save=game_save, turn_id=4)

    assert "rain falling" not in snapshot_prompt(snapshot())[1] and snapshot().proposed == STORY
    play.last_turn_swipe(game_save=game_save, expected_turn=4, number=2)
    now = snapshot()
    assert (now.proposed, now.edited, now.alternatives) == (SECOND, False, 2)
    assert (
        snapshot_prompt(now) == (second.system_prompt, second.user_prompt) and "rain falling" in snapshot_prompt(now)[1]
    )
    assert now.context == second.context and now.play_settings["authors_note"] == "Keep the rain falling."
    assert (now.model, now.completion_tokens, now.latency_ms) == (
        second.model,
        second.completion_tokens,
        second.latency_ms,
    )
    assert recorded.count() == 2  # the queries it was built with, in place of the first's
    assert sorted(recorded.values_list("result_ids", flat=True)) == sorted(
        q["result_ids"] for q in second.context["queries"]
    )
    html = tester.get(url("narrator_snapshot", game_save, 4)).content.decode()
    assert "Keep the rain falling." in html
    play.last_turn_swipe(game_save=game_save, expected_turn=4, number=1)  # and back
    back = NarratorSnapshot.objects.get(game_save=game_save, turn_id=4)
    assert (back.proposed, snapshot_prompt(back), back.context) == (
        STORY,
        (first.system_prompt, first.user_prompt),
        first.context,
    )
    assert "Keep the rain falling." not in tester.get(url("narrator_snapshot", game_save, 4)).content.decode()
    # An edited text kept as an alternative by a swipe: the snapshot keeps what the narrator read and says so.
    turn_update_narrative(game_save=game_save, turn_id=4, narrative="My own words.")
    play.last_turn_swipe(game_save=game_save, expected_turn=4, number=2)
    play.last_turn_swipe(game_save=game_save, expected_turn=4, number=3)
    by_hand = NarratorSnapshot.objects.get(game_save=game_save, turn_id=4)
    assert (by_hand.edited, by_hand.alternatives, by_hand.context) == (True, 3, second.context)


def test_a_swipe_keeps_an_edited_text_as_an_alternative(tester, game_save, narrator):
    three_alternatives(tester, game_save, narrator)
    turn_update_narrative(game_save=game_save, turn_id=4, narrative="My own words.")
    assert play.last_turn_swipes(game_save=game_save).position is None
    play.last_turn_swipe(game_save=game_save, expected_turn=4, number=2)
    assert narrative(game_save) == SECOND
    kept = NarratorAlternative.objects.get(draft__game_save=game_save, draft__status="accepted", number=4)
    assert (kept.text, kept.model) == ("My own words.", play.HAND_SOURCE)
    assert play.last_turn_swipes(game_save=game_save).count == 4


def test_a_swipe_from_an_old_page_changes_nothing(tester, game_save, narrator):
    three_alternatives(tester, game_save, narrator)
    with pytest.raises(TurnConflict):
        play.last_turn_swipe(game_save=game_save, expected_turn=3, number=2)
    with pytest.raises(play.PlayError):
        play.last_turn_swipe(game_save=game_save, expected_turn=4, number=9)
    assert narrative(game_save) == STORY


def test_an_undone_turn_is_put_back(tester, game_save, narrator):
    three_alternatives(tester, game_save, narrator)
    play.last_turn_swipe(game_save=game_save, expected_turn=4, number=2)
    html = tester.post(url("turn_undo", game_save), {"expected_turn": 4}, **HX).content.decode()
    game_save.refresh_from_db()
    assert game_save.current_turn == 3
    undone = NarratorDraft.objects.get(game_save=game_save, status=DraftStatus.UNDONE)
    assert "Put turn 4 back" in html and 'id="save-current-turn" hx-swap-oob="true">3<' in html
    assert (undone.turn_id, undone.chosen_number, undone.alternatives.count()) == (4, 2, 3)

    html = tester.post(url("draft_restore", game_save, undone.pk), **HX).content.decode()
    game_save.refresh_from_db()
    assert game_save.current_turn == 4 and narrative(game_save) == SECOND
    assert "Turn 4 is back" in html and 'id="save-current-turn" hx-swap-oob="true">4<' in html
    assert play.last_turn_swipes(game_save=game_save).count == 3  # its alternatives came back with it


def test_a_discarded_draft_can_be_brought_back_until_the_next_turn_is_accepted(tester, game_save, narrator):
    draft = services.narrator_draft_create(game_save=game_save, player_input="I wait")
    b"".join(tester.post(url("narrator_stream", game_save, draft.pk, 1)).streaming_content)
    html = tester.post(url("narrator_discard", game_save, draft.pk), **HX).content.decode()
    assert "Bring it back" in html
    assert [d.pk for d in play.set_aside_drafts(game_save=game_save)] == [draft.pk]
    tester.post(url("draft_restore", game_save, draft.pk), **HX)
    assert NarratorDraft.objects.get(pk=draft.pk).status == DraftStatus.OPEN

    # A new narration sets the open draft aside too; accepting the new one ends both.
    newer = services.narrator_draft_create(game_save=game_save, player_input="I run")
    assert NarratorDraft.objects.get(pk=draft.pk).status == DraftStatus.DISCARDED
    assert [d.pk for d in play.set_aside_drafts(game_save=game_save)] == [draft.pk]
    b"".join(tester.post(url("narrator_stream", game_save, newer.pk, 1)).streaming_content)
    services.narrator_accept(draft=NarratorDraft.objects.get(pk=newer.pk))
    game_save.refresh_from_db()
    assert play.set_aside_drafts(game_save=game_save) == []
    with pytest.raises(play.PlayError, match="accepted since"):
        play.draft_restore(game_save=game_save, draft_id=draft.pk)


def test_retry_then_discard_loses_nothing(tester, game_save, narrator):
    three_alternatives(tester, game_save, narrator)
    narrator.reply = Reply(content="A fourth try.")
    tester.post(url("turn_retry", game_save), {"expected_turn": 4, "then": "retry"}, **HX)
    draft = NarratorDraft.objects.get(game_save=game_save, status=DraftStatus.OPEN)
    html = tester.post(url("narrator_discard", game_save, draft.pk), **HX).content.decode()
    assert "Bring it back" in html
    tester.post(url("draft_restore", game_save, draft.pk), **HX)
    services.narrator_accept(draft=NarratorDraft.objects.get(pk=draft.pk), number=1)
    assert narrative(game_save) == STORY


def test_edited_turns_carry_the_mark(tester, game_save, narrator):
    draft = services.narrator_draft_create(game_save=game_save, player_input="I wait")
    b"".join(tester.post(url("narrator_stream", game_save, draft.pk, 1)).streaming_content)
    event = services.narrator_accept(draft=NarratorDraft.objects.get(pk=draft.pk), narrative=STORY + " Edited.")
    assert Event.objects.get(pk=event.pk).edited_at is not None
    assert Event.objects.get(game_save=game_save, turn_id=2).edited_at is None
    turn_update_narrative(game_save=game_save, turn_id=2, narrative="Turn 2, rewritten.")
    assert Event.objects.get(game_save=game_save, turn_id=2).edited_at is not None
    for page in (url("detail", game_save), url("timeline", game_save), url("turn_detail", game_save, 2)):
        assert 'class="badge edited"' in tester.get(page).content.decode(), page
