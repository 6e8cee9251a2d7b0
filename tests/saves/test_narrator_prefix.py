"""What a prefix cache could reuse: `saves/narrator/prefix.py` and the snapshot page's figure.

The page "What the narrator saw at turn N" compares the turn's prompt with the nearest earlier
turn's (the snapshot's system + user message, as the server reads them) and marks, in the
whole prompt, where the part the two share ends.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils.html import escape

from studio.saves.narrator.snapshots import snapshot_prompt
from studio.saves.models import NarratorSnapshot
from studio.world.models import Event
from studio.saves.narrator.prefix import prefix_share, prompt_text, split_messages
from tests.support.narration import narrate_and_accept

SYSTEM = "You narrate. Tone: grim."
TURNS = "## Recent turns\nTurn 1\n> look\nRain.\n\n"


# -- the pure function -------------------------------------------------------------------------


def test_identical_prompts_share_everything_and_read_nothing_new():
    share = prefix_share(system=SYSTEM, user=TURNS, previous_system=SYSTEM, previous_user=TURNS)
    assert share.shared_chars == share.total_chars == len(SYSTEM) + 2 + len(TURNS)
    assert (share.share, share.percent, share.new_tokens) == (1.0, 100, 0)


def test_prompts_without_a_common_beginning_share_nothing():
    share = prefix_share(system="Narrate.", user="Turn 2", previous_system="You narrate.", previous_user="Turn 1")
    assert (share.shared_chars, share.total_chars, share.percent) == (0, len("Narrate.\n\nTurn 2"), 0)
    assert share.new_tokens == len("Narrate.\n\nTurn 2") // 4  # all of it, four characters a token


def test_a_prompt_that_appends_a_turn_shares_the_previous_one_up_to_its_new_part():
    previous_user = TURNS + "## The player's action\nlook"
    user = TURNS + "Turn 2\n> wait\nFog.\n\n## The player's action\nwait"
    share = prefix_share(system=SYSTEM, user=user, previous_system=SYSTEM, previous_user=previous_user)
    text = prompt_text(SYSTEM, user)
    assert share.shared_chars == len(SYSTEM) + 2 + len(TURNS)
    assert text[share.shared_chars :].startswith("Turn 2\n> wait")
    assert share.total_chars == len(text) and share.new_tokens == (len(text) - share.shared_chars) // 4
    assert share.percent == share.shared_chars * 100 // len(text) and 0 < share.percent < 100
    system, user_split = split_messages(system=SYSTEM, user=user, shared_chars=share.shared_chars)
    assert (system.shared, system.new) == (SYSTEM, "")
    assert (user_split.shared, user_split.new) == (TURNS, user[len(TURNS) :])


def test_a_changed_system_message_leaves_the_whole_user_message_new():
    share = prefix_share(system="You narrate. Tone: warm.", user=TURNS, previous_system=SYSTEM, previous_user=TURNS)
    assert share.shared_chars == len("You narrate. Tone: ")
    system, user = split_messages(system="You narrate. Tone: warm.", user=TURNS, shared_chars=share.shared_chars)
    assert (system.shared, system.new) == ("You narrate. Tone: ", "warm.")
    assert (user.shared, user.new) == ("", TURNS)


def test_a_shared_part_ending_between_the_messages_leaves_the_system_whole_and_the_user_new():
    # "A\n\nB" after "A\n\n": the shared part ends where the user message begins.
    share = prefix_share(system="A", user="B", previous_system="A", previous_user="")
    assert share.shared_chars == 3  # "A\n\n" (the previous prompt is "A\n\n" whole)
    system, user = split_messages(system="A", user="B", shared_chars=share.shared_chars)
    assert (system.new, user.shared, user.new) == ("", "", "B")
    system, user = split_messages(system="A", user="B", shared_chars=2)  # ends inside the blank line
    assert (system.shared, system.new, user.shared, user.new) == ("A", "", "", "B")


# -- the snapshot page -------------------------------------------------------------------------


@pytest.fixture
def tester(client, playtester):
    client.force_login(playtester)
    return client


def snapshot_url(game_save, turn_id):
    return reverse("saves:narrator_snapshot", args=[game_save.save_id, turn_id])


def test_two_narrated_turns_show_the_share_and_where_the_new_part_begins(tester, game_save, meta, narrator):
    narrate_and_accept(tester, game_save, "I knock at Mira's door")
    narrate_and_accept(tester, game_save, "I wait in the rain")
    first, second = NarratorSnapshot.objects.filter(game_save=game_save).order_by("turn_id")
    assert second.prompt_delta is not None and not second.user_prompt  # stored as a delta of the first
    for snapshot in (first, second):  # their whole prompts (saves/narrator/snapshots.py)
        snapshot.system_prompt, snapshot.user_prompt = snapshot_prompt(snapshot)
    share = prefix_share(
        system=second.system_prompt,
        user=second.user_prompt,
        previous_system=first.system_prompt,
        previous_user=first.user_prompt,
    )
    assert 0 < share.percent < 100 and second.system_prompt == first.system_prompt  # the real prompts share a beginning

    page = tester.get(snapshot_url(game_save, 5)).content.decode()
    assert (
        f"Shared with turn 4's prompt: {share.percent}%</strong> ({share.shared_chars:,} of {share.total_chars:,} "
        f"characters); a server with a prefix cache reads about {share.new_tokens:,} new tokens."
    ) in page
    assert "nearest earlier turn" not in page  # turn 4 is the turn just before
    meta_link = reverse("universes:meta", args=[game_save.universe.slug]) + "?key=context_cap_recall#meta-add"
    assert f'href="{meta_link}"' in page
    # The whole prompt: the system message is all shared; the user message is marked where turn 4's ends.
    new_part = second.user_prompt[share.shared_chars - len(second.system_prompt) - 2 :]
    assert new_part.startswith("Turn 4\n")  # the turn the previous prompt did not have
    assert '<mark class="prompt-new" id="prompt-new" data-label="new since turn 4">' in page
    assert page.count('<mark class="prompt-new"') == 1
    shared_user = second.user_prompt[: len(second.user_prompt) - len(new_part)]
    assert f'<pre class="wrap">{escape(shared_user)}<mark class="prompt-new" id="prompt-new"' in page
    assert f"{escape(new_part)}</mark></pre>" in page

    first_page = tester.get(snapshot_url(game_save, 4)).content.decode()
    assert "No earlier record: no turn before turn 4 was narrated in the studio" in first_page
    assert "Shared with turn" not in first_page and "prompt-new" not in first_page
    assert escape(first.user_prompt) in first_page  # the whole prompt, unmarked


def test_the_nearest_earlier_snapshot_is_the_one_compared_and_named(tester, game_save):
    Event.objects.create(game_save=game_save, turn_id=4, player_input="input 4", narrative="Turn 4 text.")
    for turn_id, user in ((1, TURNS), (4, TURNS + "Turn 3\n")):
        NarratorSnapshot.objects.create(game_save=game_save, turn_id=turn_id, system_prompt=SYSTEM, user_prompt=user)
    page = tester.get(snapshot_url(game_save, 4)).content.decode()
    total = len(SYSTEM) + 2 + len(TURNS) + len("Turn 3\n")
    shared = len(SYSTEM) + 2 + len(TURNS)
    assert f"Shared with turn 1's prompt: {shared * 100 // total}%</strong> ({shared} of {total} characters)" in page
    assert "Turn 1 is the nearest earlier turn the narrator wrote." in page
    # A system message that changed: the mark is in the system message, and the user message is all new.
    NarratorSnapshot.objects.filter(game_save=game_save, turn_id=4).update(system_prompt="You narrate. Tone: warm.")
    page = tester.get(snapshot_url(game_save, 4)).content.decode()
    assert (
        '<pre class="wrap">You narrate. Tone: <mark class="prompt-new" id="prompt-new" data-label="new since turn 1">warm.</mark></pre>'
        in page
    )
    assert '<pre class="wrap"><mark class="prompt-new">## Recent turns' in page


def test_the_page_reads_one_previous_prompt_however_many_turns_came_before(tester, game_save):
    for turn_id in (1, 2, 3):
        NarratorSnapshot.objects.create(
            game_save=game_save,
            turn_id=turn_id,
            system_prompt=SYSTEM,
            user_prompt=TURNS + f"Turn {turn_id}\n" * turn_id,
        )
    counts = {}
    for turn_id in (1, 2, 3):
        with CaptureQueriesContext(connection) as queries:
            assert tester.get(snapshot_url(game_save, turn_id)).status_code == 200
        counts[turn_id] = len(queries)
        previous = [q["sql"] for q in queries if "narratorsnapshot" in q["sql"] and '"turn_id" <' in q["sql"]]
        assert len(previous) == 1 and '"user_prompt"' in previous[0] and '"context"' not in previous[0]
    assert counts[1] == counts[2] == counts[3]


def test_a_turn_without_a_snapshot_compares_nothing(tester, game_save):
    NarratorSnapshot.objects.create(game_save=game_save, turn_id=1, system_prompt=SYSTEM, user_prompt=TURNS)
    page = tester.get(snapshot_url(game_save, 2)).content.decode()
    assert (
        "was not narrated in the studio" in page and "Shared with turn" not in page and "No earlier record" not in page
    )
