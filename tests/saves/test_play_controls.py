"""The Console's play controls (issue 23): opening from a card, Continue, Stop, Impersonate,
Undo / Retry / swipes of the last turn, edit of a past turn, author's note, sampler settings,
input modes, and the LLM call log's request and answer on the job and turn pages.

Against the scripted OpenAI-compatible server (tests/llm_server.py): the narratives are the
test's; what is checked is what the studio sends, keeps and appends.
"""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from studio.memory.models import Job, JobKind, LLMCall
from studio.saves.models import AlternativeStatus, DraftStatus, NarratorDraft, NarratorSnapshot, PlaySettings
from studio.world.models import Event, UniverseMeta
from studio.saves.narrator import impersonate, opening, play, services
from studio.saves.narrator.authors_note import insert_at_depth
from studio.saves.narrator.prompt import build_narrator_prompt
from studio.saves.narrator.sampler import InvalidSampler, parse_value, resolve_sampler
from tests.llm_server import Reply, operation_of, user_prompt
from tests.plugins.narrator import STORY
from tests.support.narration import narrate_and_accept, stream_all

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def tester(client, playtester):
    client.force_login(playtester)
    return client


def url(name, game_save, *args):
    return reverse(f"saves:{name}", args=[game_save.save_id, *args])


def narrate_requests(narrator):
    return [r for r in narrator.server.requests if operation_of(r) == "narrate"]


# -- input modes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, mode, shaped",
    [
        ("open the door", "do", "You open the door."),
        ("I open the door!", "do", "You open the door!"),
        ("hello there", "say", "You say: \u201chello there\u201d"),
        ('"Hello."', "say", 'You say: "Hello."'),
        ("The rain stops.", "story", "The rain stops."),
        ("  ", "do", ""),
    ],
)
def test_input_modes_shape_the_action(text, mode, shaped):
    assert play.shape_action(text, mode) == shaped


def test_narrate_sends_the_shaped_action(tester, game_save, narrator):
    tester.post(url("narrate", game_save), {"player_input": "ask Mira about the ledger", "mode": "say"}, **HX)
    draft = NarratorDraft.objects.get(game_save=game_save)
    assert draft.player_input == "You say: \u201cask Mira about the ledger\u201d"


# -- author's note ----------------------------------------------------------------------------------


def test_insert_at_depth_counts_sections_from_the_end():
    parts = ["memory", "recent", "action", "Narrate."]
    assert insert_at_depth(parts, "NOTE", 0)[-1].endswith("NOTE")
    assert insert_at_depth(parts, "NOTE", 1)[3].endswith("NOTE") and insert_at_depth(parts, "NOTE", 1)[4] == "Narrate."
    assert insert_at_depth(parts, "NOTE", 99)[0].endswith("NOTE")
    assert insert_at_depth(parts, "  ", 1) == parts


def test_authors_note_is_in_the_prompt_the_preview_and_the_snapshot(tester, game_save, meta, narrator):
    PlaySettings.objects.create(
        game_save=game_save, authors_note="Keep {{user}} soaked by the rain.", authors_note_depth=2
    )
    prompt = build_narrator_prompt(game_save=game_save, player_input="I wait")
    note_at = prompt.user.index("## Author's note\nKeep Wren Halloway soaked by the rain.")
    assert note_at < prompt.user.index("## The player's action") < prompt.user.index("Narrate turn 4.")
    preview = tester.get(url("narrator_prompt", game_save), {"input": "I wait"}).content.decode()
    assert "Keep Wren Halloway soaked by the rain." in preview and "Author's note at depth 2" in preview
    narrate_and_accept(tester, game_save)
    snapshot = NarratorSnapshot.objects.get(game_save=game_save, turn_id=4)
    assert snapshot.play_settings["authors_note"] == "Keep {{user}} soaked by the rain."
    assert snapshot.play_settings["authors_note_depth"] == 2 and "soaked" in snapshot.user_prompt
    page = tester.get(url("narrator_snapshot", game_save, 4)).content.decode()
    assert "at depth 2" in page


def test_a_narration_reads_the_play_settings_once(tester, game_save, narrator):
    """The prompt's note, the sampler and what the alternative keeps share one read (it was three)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    PlaySettings.objects.create(game_save=game_save, authors_note="Mist.", authors_note_depth=1, temperature=0.2)
    draft = services.narrator_draft_create(game_save=game_save, player_input="I wait")
    with CaptureQueriesContext(connection) as queries:
        stream_all(tester, game_save, draft, 1)
    reads = [q["sql"] for q in queries if '"saves_playsettings"' in q["sql"] and q["sql"].startswith("SELECT")]
    assert len(reads) == 1, reads
    alternative = draft.alternatives.get(number=1)
    assert alternative.play_settings["authors_note"] == "Mist." and "## Author's note\nMist." in alternative.user_prompt
    assert alternative.play_settings["sampler"]["temperature"] == {"value": 0.2, "source": "save"}
    assert narrate_requests(narrator)[-1]["temperature"] == 0.2


def test_a_narration_reads_the_universes_meta_once(tester, game_save, narrator):
    """The instructions, the memory budget, the memory context and the sampler share one read of the
    universe's meta (the lore activation has its own); it was four."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    UniverseMeta.objects.create(universe=game_save.universe, key="context_budget", value="900")
    UniverseMeta.objects.create(universe=game_save.universe, key="sampler_temperature", value="0.3")
    draft = services.narrator_draft_create(game_save=game_save, player_input="I wait")
    with CaptureQueriesContext(connection) as queries:
        stream_all(tester, game_save, draft, 1)
    reads = [q["sql"] for q in queries if q["sql"].startswith("SELECT") and 'FROM "universes_universemeta"' in q["sql"]]
    assert len(reads) == 2, reads
    alternative = draft.alternatives.get(number=1)
    assert alternative.context["token_budget"] == 900 and narrate_requests(narrator)[-1]["temperature"] == 0.3


# -- sampler settings -------------------------------------------------------------------------------


def test_sampler_save_over_universe_over_environment(game_save, settings):
    settings.AXIOM_LLM_OPERATION_OPTIONS = {"narrate": {"temperature": 0.8, "max_tokens": None}}
    settings.AXIOM_LLM_MAX_TOKENS = 1024
    UniverseMeta.objects.create(universe=game_save.universe, key="sampler_top_p", value="0.9")
    UniverseMeta.objects.create(universe=game_save.universe, key="sampler_temperature", value="0.5")
    UniverseMeta.objects.create(universe=game_save.universe, key="sampler_repeat_penalty", value="lots")
    PlaySettings.objects.create(game_save=game_save, temperature=1.1)
    sampler = resolve_sampler(game_save=game_save)
    assert sampler.values == {
        "temperature": 1.1,
        "top_p": 0.9,
        "max_tokens": 1024,
        "frequency_penalty": None,
        "repeat_penalty": None,
    }
    assert sampler.sources == {
        "temperature": "save",
        "top_p": "universe",
        "max_tokens": "environment",
        "frequency_penalty": "server default",
        "repeat_penalty": "server default",
    }
    assert any("sampler_repeat_penalty" in p for p in sampler.problems)
    assert sampler.request_options() == {"sampling": {"temperature": 1.1, "top_p": 0.9}, "max_tokens": 1024}


@pytest.mark.parametrize(
    "name, value", [("temperature", "3"), ("top_p", "-0.1"), ("max_tokens", "1.5"), ("temperature", "nan")]
)
def test_sampler_values_out_of_range_are_refused(name, value):
    with pytest.raises(InvalidSampler):
        parse_value(name, value)


def test_the_narration_is_sent_with_the_sampler_settings(tester, game_save, narrator):
    PlaySettings.objects.create(game_save=game_save, temperature=0.3, top_p=0.7, max_tokens=64, frequency_penalty=0.5)
    narrate_and_accept(tester, game_save)
    sent = narrate_requests(narrator)[-1]
    assert (sent["temperature"], sent["top_p"], sent["max_tokens"], sent["frequency_penalty"]) == (0.3, 0.7, 64, 0.5)
    sampler = NarratorSnapshot.objects.get(game_save=game_save, turn_id=4).play_settings["sampler"]
    assert sampler["temperature"] == {"value": 0.3, "source": "save"}


def test_play_settings_form_saves_and_refuses_bad_values(tester, client, game_save):
    response = tester.post(
        url("play_settings", game_save),
        {
            "authors_note": "Storm coming.",
            "authors_note_depth": "3",
            "temperature": "0.6",
            "max_tokens": "200",
            "top_p": "",
            "frequency_penalty": "",
            "repeat_penalty": "",
        },
        **HX,
    )
    assert response.status_code == 200 and "Saved" in response.content.decode()
    row = PlaySettings.objects.get(game_save=game_save)
    assert (row.authors_note, row.authors_note_depth, row.temperature, row.max_tokens, row.top_p) == (
        "Storm coming.",
        3,
        0.6,
        200,
        None,
    )
    html = tester.post(
        url("play_settings", game_save), {"authors_note": "", "authors_note_depth": "1", "temperature": "9"}, **HX
    ).content.decode()
    assert (
        "The temperature must be from 0 to 2." in html
        and PlaySettings.objects.get(game_save=game_save).temperature == 0.6
    )
    page = tester.get(url("play_settings", game_save)).content.decode()
    assert 'data-setting="temperature"' in page and "0.6" in page


@pytest.fixture
def reader(universe):
    """A member of the universe in no group: may read, may not act."""
    from django.contrib.auth.models import User

    user = User.objects.create_user("reader", password="pw")
    universe.members.add(user)
    return user


def test_only_playtesters_change_play_settings(client, reader, game_save):
    client.force_login(reader)
    response = client.post(url("play_settings", game_save), {"authors_note": "x", "authors_note_depth": "1"})
    assert response.status_code != 200 and not PlaySettings.objects.exists()
    page = client.get(url("play_settings", game_save)).content.decode()
    assert "Only playtesters change" in page


# -- the opening turn -------------------------------------------------------------------------------


@pytest.fixture
def carded_save(universe, author, playtester):
    from studio.saves.services import save_create
    from studio.universes import services as universe_services
    from studio.universes.interchange import character_card

    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Mira",
            "description": "A harbour clerk.",
            "first_mes": "Mira looks up at {{user}}. \u201cYou're late.\u201d",
            "alternate_greetings": ["The ledger slams shut as {{user}} comes in.", "Rain. Mira does not look up."],
        },
    }
    book = character_card.parse_card(json.dumps(card).encode(), filename="mira.json")
    universe_services.card_import(universe=universe, user=author, book=book)
    UniverseMeta.objects.create(universe=universe, key="player_character", value="Wren")
    return save_create(universe=universe, name="Fresh")


def test_the_opening_offers_the_cards_greetings_and_accepts_one(
    tester, carded_save, settings, eager_jobs, vector_memory
):
    settings.AXIOM_LLM_BASE_URL = ""  # no model is needed for the opening
    console = tester.get(url("detail", carded_save)).content.decode()
    assert 'id="opening-start"' in console and "3 greetings" in console
    html = tester.post(url("narrator_opening", carded_save), **HX).content.decode()
    draft = NarratorDraft.objects.get(game_save=carded_save)
    texts = list(draft.alternatives.values_list("text", flat=True))
    assert texts == [
        "Mira looks up at Wren. \u201cYou're late.\u201d",
        "The ledger slams shut as Wren comes in.",
        "Rain. Mira does not look up.",
    ]
    assert 'id="draft-swipe-count" aria-live="polite">1/3' in html and "Accept as turn 1" in html
    tester.post(url("narrator_choose", carded_save, draft.pk), {"number": 2}, **HX)
    tester.post(url("narrator_accept", carded_save, draft.pk), {"number": 2}, **HX)
    event = Event.objects.get(game_save=carded_save, turn_id=1)
    assert (event.player_input, event.narrative) == ("", "The ledger slams shut as Wren comes in.")
    with pytest.raises(play.PlayError):
        opening.opening_draft_create(game_save=carded_save)  # only as turn 1


def test_without_an_opening_or_a_card_the_opening_is_refused(tester, universe):
    from studio.saves.services import save_create

    fresh = save_create(universe=universe, name="No card")
    html = tester.post(url("narrator_opening", fresh), **HX).content.decode()
    assert "has no opening" in html and not NarratorDraft.objects.filter(game_save=fresh).exists()


# -- continue ---------------------------------------------------------------------------------------


def test_continue_extends_the_chosen_narration(tester, game_save, narrator):
    draft = services.narrator_draft_create(game_save=game_save, player_input="I wait")
    stream_all(tester, game_save, draft, 1)
    narrator.reply = Reply(content="Then the bell rings.")
    html = tester.post(url("narrator_continue", game_save, draft.pk), **HX).content.decode()
    assert url("narrator_stream", game_save, draft.pk, 2) in html
    assert stream_all(tester, game_save, draft, 2) == "Then the bell rings."
    second = draft.alternatives.get(number=2)
    assert second.text == f"{STORY} Then the bell rings." and second.prefix == STORY
    sent = narrate_requests(narrator)[-1]
    assert "## The narration so far (turn 4)\n" + STORY in user_prompt(sent)
    assert draft.alternatives.get(number=1).text == STORY  # kept
    services.narrator_accept(draft=NarratorDraft.objects.get(pk=draft.pk))
    assert Event.objects.get(game_save=game_save, turn_id=4).narrative == f"{STORY} Then the bell rings."


def test_continue_needs_text(tester, game_save, narrator):
    draft = services.narrator_draft_create(game_save=game_save, player_input="I wait")
    html = tester.post(url("narrator_continue", game_save, draft.pk), **HX).content.decode()
    assert "Only a narration with text can be continued" in html and draft.alternatives.count() == 1


# -- stop -------------------------------------------------------------------------------------------


def test_stop_keeps_the_shown_text_editable_and_never_appends(tester, game_save, narrator):
    narrator.reply = Reply(content=STORY, chunk_delay=0.2)
    draft = services.narrator_draft_create(game_save=game_save, player_input="I dive")
    alternative = draft.alternatives.get()
    deltas = services.narration_stream(alternative_id=alternative.pk)
    shown = next(deltas)
    html = tester.post(url("narrator_stop", game_save, draft.pk, 1), {"shown_text": shown}, **HX).content.decode()
    assert "Stopped; nothing was appended." in html and "Accept the edited text as turn 4" in html
    rest = list(deltas)  # the stream notices the Stop and ends early, closing the model's stream
    assert len(rest) < len(STORY.split()) - 1
    alternative.refresh_from_db()
    assert alternative.status == AlternativeStatus.CANCELLED and alternative.text == shown.strip()
    assert alternative.completion_tokens >= 0 and alternative.system_prompt  # the usage and prompt are added
    with pytest.raises(services.NarratorError):
        services.narrator_accept(draft=draft)  # not by itself
    assert Event.objects.filter(game_save=game_save).count() == 3
    services.narrator_accept(draft=draft, narrative=shown.strip() + " You surface.")
    assert Event.objects.get(game_save=game_save, turn_id=4).narrative == shown.strip() + " You surface."


def test_stop_after_the_end_changes_nothing(tester, game_save, narrator):
    draft = services.narrator_draft_create(game_save=game_save, player_input="I wait")
    stream_all(tester, game_save, draft, 1)
    html = tester.post(url("narrator_stop", game_save, draft.pk, 1), {"shown_text": "x"}, **HX).content.decode()
    assert "already ended" in html and draft.alternatives.get().status == AlternativeStatus.DONE


# -- impersonate ------------------------------------------------------------------------------------


def test_impersonate_writes_the_action_into_the_box(tester, game_save, narrator):
    seen = []

    def pipeline(request):
        seen.append(request)
        return Reply(content="You ask Mira about the ledger.")

    narrator.pipeline = pipeline
    html = tester.post(url("narrator_impersonate", game_save), {"mode": "do"}, **HX).content.decode()
    assert ">You ask Mira about the ledger.</textarea>" in html and 'value="story" checked' in html
    assert "Turn 3 text." in user_prompt(seen[-1]) and not NarratorDraft.objects.exists()
    call = LLMCall.objects.get(game_save=game_save, operation="impersonate")
    assert call.answer == "You ask Mira about the ledger." and "Turn 3 text." in call.request
    # Without JavaScript: the Console shows it in the box after the redirect.
    response = tester.post(url("narrator_impersonate", game_save), {"mode": "do"})
    assert response.status_code == 302
    assert ">You ask Mira about the ledger.</textarea>" in tester.get(url("detail", game_save)).content.decode()


def test_impersonate_reads_the_turns_the_narrator_shows(game_save, narrator):
    # Seven short turns of one open chapter: the narrator's window shows them all (not only
    # the last four), and the impersonation reads the same turns, as the narrator shows them.
    for turn in range(4, 8):
        Event.objects.create(
            game_save=game_save, turn_id=turn, player_input=f"input {turn}", narrative=f"Turn {turn} text."
        )
    game_save.current_turn = 7
    game_save.save()
    seen = []
    narrator.pipeline = lambda request: seen.append(request) or Reply(content="You wave.")
    shown = build_narrator_prompt(game_save=game_save, player_input="I wait").shown_turns
    impersonate.impersonate(game_save=game_save)
    prompt = user_prompt(seen[-1])
    assert shown == [1, 2, 3, 4, 5, 6, 7]
    assert [int(n) for n in re.findall(r"^Turn (\d+)$", prompt, flags=re.M)] == shown
    assert "> input 1\nTurn 1 text." in prompt


def test_impersonate_reads_the_narrators_window_when_the_budget_bounds_it(game_save, narrator):
    # Long turns: the narrator's window (its share of the budget, less what is kept for
    # recall) holds only the last few; the impersonation reads exactly those.
    Event.objects.filter(game_save=game_save).update(narrative=" ".join(["The tide rolls in."] * 30))
    for turn in range(4, 13):
        Event.objects.create(
            game_save=game_save,
            turn_id=turn,
            player_input=f"input {turn}",
            narrative=" ".join([f"Turn {turn}: the tide rolls in."] * 30),
        )
    game_save.current_turn = 12
    game_save.save()
    seen = []
    narrator.pipeline = lambda request: seen.append(request) or Reply(content="You wave.")
    shown = build_narrator_prompt(game_save=game_save, player_input="I wait").shown_turns
    impersonate.impersonate(game_save=game_save)
    assert 12 in shown and len(shown) < 12
    assert [int(n) for n in re.findall(r"^Turn (\d+)$", user_prompt(seen[-1]), flags=re.M)] == shown


@pytest.mark.parametrize("budget", ["600", "8000"])
def test_impersonate_reads_the_narrators_window_at_the_universes_budget(game_save, narrator, budget):
    # The universe's context_budget moves the narrator's window (fewer turns at 600, more at
    # 8,000 than at the built-in 2,000); the impersonation plans the same window with it.
    for turn in range(4, 21):
        Event.objects.create(
            game_save=game_save,
            turn_id=turn,
            player_input=f"input {turn}",
            narrative=" ".join([f"Turn {turn}: the tide rolls in."] * 20),
        )
    game_save.current_turn = 20
    game_save.save()
    # The window's turn bound (context_recent_turns, 10 by default) would hold it at 8,000 as at 2,000.
    UniverseMeta.objects.create(universe=game_save.universe, key="context_recent_turns", value="40")
    default = build_narrator_prompt(game_save=game_save, player_input="I wait").shown_turns
    UniverseMeta.objects.create(universe=game_save.universe, key="context_budget", value=budget)
    seen = []
    narrator.pipeline = lambda request: seen.append(request) or Reply(content="You wave.")
    shown = build_narrator_prompt(game_save=game_save, player_input="I wait").shown_turns
    impersonate.impersonate(game_save=game_save)
    assert 20 in shown and shown != default
    assert (len(shown) < len(default)) if budget == "600" else (len(shown) > len(default))
    assert [int(n) for n in re.findall(r"^Turn (\d+)$", user_prompt(seen[-1]), flags=re.M)] == shown


# -- undo, retry, swipes ----------------------------------------------------------------------------


def test_undo_rewinds_one_turn_and_hands_the_action_back(tester, game_save, eager_jobs, vector_memory):
    html = tester.post(url("turn_undo", game_save), {"expected_turn": 3}, **HX).content.decode()
    game_save.refresh_from_db()
    assert game_save.current_turn == 2 and not Event.objects.filter(game_save=game_save, turn_id=3).exists()
    assert "Turn 3 undone" in html and "input 3</textarea>" in html


def test_undo_from_an_old_page_changes_nothing(tester, game_save, eager_jobs, vector_memory):
    html = tester.post(url("turn_undo", game_save), {"expected_turn": 2}, **HX).content.decode()
    game_save.refresh_from_db()
    assert game_save.current_turn == 3 and "nothing was undone" in html


def test_retry_keeps_the_old_text_as_an_alternative_and_narrates_again(tester, game_save, narrator):
    narrate_and_accept(tester, game_save, "I wait")
    narrator.reply = Reply(content="Fog hides the quay.")
    html = tester.post(url("turn_retry", game_save), {"expected_turn": 4, "then": "retry"}, **HX).content.decode()
    game_save.refresh_from_db()
    assert game_save.current_turn == 3 and "Turn 4 is a draft again" in html
    draft = NarratorDraft.objects.get(game_save=game_save, status=DraftStatus.OPEN)
    assert (draft.turn_id, draft.player_input, draft.chosen_number) == (4, "I wait", 2)
    assert stream_all(tester, game_save, draft, 2) == "Fog hides the quay."
    assert list(draft.alternatives.values_list("text", flat=True)) == [STORY, "Fog hides the quay."]
    services.narrator_accept(draft=NarratorDraft.objects.get(pk=draft.pk))
    assert Event.objects.get(game_save=game_save, turn_id=4).narrative == "Fog hides the quay."
    assert NarratorSnapshot.objects.get(game_save=game_save, turn_id=4).alternatives == 2


def test_swipes_of_a_hand_written_last_turn_start_from_its_text(tester, game_save, narrator):
    html = tester.post(url("turn_retry", game_save), {"expected_turn": 3, "then": "swipe"}, **HX).content.decode()
    draft = NarratorDraft.objects.get(game_save=game_save, status=DraftStatus.OPEN)
    alternative = draft.alternatives.get()
    assert (alternative.text, alternative.model, alternative.status) == ("Turn 3 text.", play.HAND_SOURCE, "done")
    assert "Accept as turn 3" in html
    services.narrator_accept(draft=draft)
    event = Event.objects.get(game_save=game_save, turn_id=3)
    assert (event.player_input, event.narrative) == ("input 3", "Turn 3 text.")


def test_last_turn_controls_show_on_the_console(tester, game_save, narrator):
    narrate_and_accept(tester, game_save)
    html = tester.get(url("detail", game_save)).content.decode()
    assert 'id="turn-undo"' in html and 'id="turn-retry"' in html and 'id="turn-continue"' in html
    assert 'name="expected_turn" value="4"' in html and 'id="turn-edit-2"' in html


def test_continue_of_the_last_turn(tester, game_save, narrator):
    narrate_and_accept(tester, game_save)
    narrator.reply = Reply(content="The bell rings.")
    tester.post(
        url("turn_retry", game_save), {"expected_turn": 4, "then": "continue"}
    )  # no JavaScript: runs to the end
    draft = NarratorDraft.objects.get(game_save=game_save, status=DraftStatus.OPEN)
    assert draft.alternatives.get(number=draft.chosen_number).text == f"{STORY} The bell rings."


def test_continue_of_the_last_turn_keeps_the_memory_context_of_the_narration_it_extends(tester, game_save, narrator):
    # As a Continue of a draft does: the continuation reuses the base's prompt, so its record
    # (and the accepted turn's snapshot) keeps the base's memory context, not an empty one.
    event = narrate_and_accept(tester, game_save)
    base_context = NarratorSnapshot.objects.get(game_save=game_save, turn_id=event.turn_id).context
    assert base_context
    narrator.reply = Reply(content="The bell rings.")
    tester.post(url("turn_retry", game_save), {"expected_turn": 4, "then": "continue"})
    draft = NarratorDraft.objects.get(game_save=game_save, status=DraftStatus.OPEN)
    continued = draft.alternatives.get(number=draft.chosen_number)
    assert continued.text == f"{STORY} The bell rings." and continued.context == base_context


# -- edit of a past turn ----------------------------------------------------------------------------


def test_edit_a_past_turn_from_the_console(tester, game_save, eager_jobs, vector_memory):
    html = tester.post(
        url("turn_edit", game_save, 2), {"narrative": "Turn 2, rewritten.", "next": "console"}, **HX
    ).content.decode()
    assert 'id="console"' in html and "Turn 2 updated" in html
    assert Event.objects.get(game_save=game_save, turn_id=2).narrative == "Turn 2, rewritten."
    assert Job.objects.filter(game_save=game_save, turn_id=2).exists()  # re-embedded (and re-extracted in living)
    response = tester.post(url("turn_edit", game_save, 1), {"narrative": "Turn 1, rewritten.", "next": "console"})
    assert response.status_code == 302 and response["Location"] == url("detail", game_save)


# -- feedback: call log, job page ------------------------------------------------------------------


def test_each_call_keeps_its_request_and_answer(tester, game_save, narrator):
    narrate_and_accept(tester, game_save)
    call = LLMCall.objects.get(game_save=game_save, operation="narrate")
    assert call.answer == STORY and "## system\nYou are the narrator" in call.request and "I wait" in call.request


def test_job_page_shows_the_step_and_each_calls_request_and_answer(tester, client, reader, game_save):
    job = Job.objects.create(kind=JobKind.LIVING_TURN, game_save=game_save, turn_id=3, status="done", progress="done")
    LLMCall.objects.create(
        game_save=game_save,
        job=job,
        operation="extract",
        request="## user\nTurn 3 text.",
        answer="not json at all",
        latency_ms=1200,
    )
    LLMCall.objects.create(game_save=game_save, job=job, operation="reflect", error="HTTP 500 from the server")
    page = tester.get(reverse("memory:job_detail", args=[game_save.save_id, job.pk])).content.decode()
    assert "not json at all" in page and "HTTP 500 from the server" in page and "at least 2 beliefs" in page
    turn_page = tester.get(url("turn_detail", game_save, 3)).content.decode()
    assert "not json at all" in turn_page
    client.force_login(reader)  # not a playtester: the calls are not shown
    page = client.get(reverse("memory:job_detail", args=[game_save.save_id, job.pk])).content.decode()
    assert "not json at all" not in page and "Playtesters can read" in page


def test_a_running_job_says_how_long_its_step_runs(game_save):
    from datetime import timedelta

    from django.utils import timezone

    now = timezone.now()
    job = Job.objects.create(
        kind=JobKind.LIVING_TURN,
        game_save=game_save,
        turn_id=3,
        status="running",
        progress="extracting facts",
        started_at=now - timedelta(seconds=50),
        progress_at=now - timedelta(seconds=20),
    )
    assert 19 <= job.step_seconds <= 25 and 49 <= job.running_seconds <= 55
    job.status = "done"
    assert job.step_seconds is None and job.running_seconds is None


# -- fork and save file ------------------------------------------------------------------------------


def test_a_fork_copies_the_play_settings_and_the_save_file_keeps_snapshot_settings(
    tester, game_save, universe, narrator
):
    from studio.saves import portable
    from studio.saves.checkpoints import CheckpointManager

    PlaySettings.objects.create(game_save=game_save, authors_note="Fog.", authors_note_depth=0, temperature=0.4)
    narrate_and_accept(tester, game_save)
    fork = CheckpointManager().fork(game_save, 4)
    copied = PlaySettings.objects.get(game_save=fork)
    assert (copied.authors_note, copied.authors_note_depth, copied.temperature) == ("Fog.", 0, 0.4)
    assert PlaySettings.objects.get(game_save=game_save).authors_note == "Fog."  # the source keeps its own
    data = portable.save_export(game_save=game_save).read()
    item = json.loads(data)["sections"]["narrator_snapshots"]["items"][0]
    assert item["play_settings"]["authors_note"] == "Fog."
    imported = portable.save_import(universe=universe, data=data).game_save
    assert NarratorSnapshot.objects.get(game_save=imported, turn_id=4).play_settings["authors_note"] == "Fog."
    # An older file without the field still imports.
    document = json.loads(data)
    del document["sections"]["narrator_snapshots"]["items"][0]["play_settings"]
    older = portable.save_import(universe=universe, data=json.dumps(document).encode()).game_save
    assert NarratorSnapshot.objects.get(game_save=older, turn_id=4).play_settings == {}


def test_the_save_file_carries_the_saves_play_settings(game_save, universe):
    """Round trip, checked with the settings' own ranges (nothing written on a problem), and an
    older file without the section imports with no settings."""
    from studio.saves import portable
    from studio.world.models import Save

    PlaySettings.objects.create(
        game_save=game_save, authors_note="Rain, always.", authors_note_depth=3, temperature=0.4, max_tokens=300
    )
    data = portable.save_export(game_save=game_save).read()
    document = json.loads(data)
    assert document["sections"]["play_settings"]["items"] == [
        {
            "authors_note": "Rain, always.",
            "authors_note_depth": 3,
            "temperature": 0.4,
            "top_p": None,
            "max_tokens": 300,
            "frequency_penalty": None,
            "repeat_penalty": None,
        }
    ]
    result = portable.save_import(universe=universe, data=data)
    row = PlaySettings.objects.get(game_save=result.game_save)
    assert (row.authors_note, row.authors_note_depth, row.temperature, row.max_tokens, row.top_p) == (
        "Rain, always.",
        3,
        0.4,
        300,
        None,
    )
    assert result.counts["play_settings"] == 1 and result.warnings == []
    assert portable.save_export(game_save=result.game_save).read() == data

    saves = Save.objects.count()
    bad = json.loads(data)
    bad["sections"]["play_settings"]["items"][0].update(temperature=3, authors_note_depth=99, top_p="high")
    with pytest.raises(portable.SaveFileError) as refused:
        portable.save_import(universe=universe, data=json.dumps(bad).encode())
    where = "sections.play_settings.items[0]"
    assert {p.location for p in refused.value.problems} == {
        f"{where}.temperature",
        f"{where}.authors_note_depth",
        f"{where}.top_p",
    }
    assert (
        "temperature: must be from 0 to 2" in str(refused.value) and Save.objects.count() == saves
    )  # nothing half-written
    two = json.loads(data)
    two["sections"]["play_settings"]["items"] *= 2
    with pytest.raises(portable.SaveFileError, match="one set of play settings"):
        portable.save_import(universe=universe, data=json.dumps(two).encode())

    older = json.loads(data)
    del older["sections"]["play_settings"]
    imported = portable.save_import(universe=universe, data=json.dumps(older).encode()).game_save
    assert not PlaySettings.objects.filter(game_save=imported).exists()
    assert json.loads(portable.save_export(game_save=imported).read())["sections"]["play_settings"]["items"] == []


# -- the services the API calls ----------------------------------------------------------------------


def test_play_settings_update_checks_every_value_and_saves_nothing_on_error(game_save):
    from studio.saves.narrator.play_settings import play_settings_read, play_settings_update

    state = play_settings_update(
        game_save=game_save, changes={"authors_note": "Rain.", "temperature": 0.5, "max_tokens": 90}
    )
    assert state["authors_note"] == "Rain." and state["overrides"]["temperature"] == 0.5
    assert state["effective"]["max_tokens"] == {"value": 90, "source": "save"}
    for bad in (
        {"temperature": 5},
        {"max_tokens": 1.5},
        {"authors_note_depth": -1},
        {"top_p": "0.5"},
        {"authors_note": "x" * 3000},
        {"seed": 1},
        {"temperature": True},
    ):
        with pytest.raises(ValueError):
            play_settings_update(game_save=game_save, changes={"authors_note": "changed", **bad})
    assert play_settings_read(game_save=game_save)["authors_note"] == "Rain."
    assert play_settings_update(game_save=game_save, changes={"temperature": None})["overrides"]["temperature"] is None


def test_opening_accept_appends_the_chosen_greeting(carded_save):
    with pytest.raises(play.PlayError):
        opening.opening_accept(game_save=carded_save, number=4)
    event = opening.opening_accept(game_save=carded_save, number=3)
    assert (event.turn_id, event.narrative) == (1, "Rain. Mira does not look up.")
    with pytest.raises(play.PlayError):
        opening.opening_accept(game_save=carded_save, number=1)


def test_continue_once_extends_the_last_turn_and_stores_nothing(game_save, narrator):
    narrator.reply = Reply(content="The bell rings.")
    result = play.continue_once(game_save=game_save)
    assert result.addition == "The bell rings." and result.narrative == "Turn 3 text. The bell rings."
    assert "## The narration so far (turn 3)\nTurn 3 text." in user_prompt(narrate_requests(narrator)[-1])
    assert Event.objects.get(game_save=game_save, turn_id=3).narrative == "Turn 3 text."


def test_empty_memory_pages_of_a_living_save_say_what_each_layer_needs(tester, game_save):
    game_save.memory_mode = "living"
    game_save.save()
    models = tester.get(reverse("memory:mental_models", args=[game_save.save_id])).content.decode()
    assert "at least two beliefs" in models
    beliefs = tester.get(reverse("memory:beliefs", args=[game_save.save_id])).content.decode()
    assert "Beliefs form from the facts" in beliefs
    facts = tester.get(reverse("memory:facts", args=[game_save.save_id])).content.decode()
    assert "shows what the model answered" in facts


def test_a_continued_narration_continued_again_asks_once(tester, game_save, narrator):
    draft = services.narrator_draft_create(game_save=game_save, player_input="I wait")
    stream_all(tester, game_save, draft, 1)
    narrator.reply = Reply(content="One.")
    tester.post(url("narrator_continue", game_save, draft.pk), **HX)
    stream_all(tester, game_save, draft, 2)
    narrator.reply = Reply(content="Two.")
    tester.post(url("narrator_continue", game_save, draft.pk), **HX)
    stream_all(tester, game_save, draft, 3)
    sent = user_prompt(narrate_requests(narrator)[-1])
    assert sent.count("## The narration so far") == 1 and f"{STORY} One." in sent
    assert draft.alternatives.get(number=3).text == f"{STORY} One. Two."
