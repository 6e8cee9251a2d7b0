"""The Console's narrator against the scripted OpenAI-compatible server (tests/llm_server.py).

The narratives here are whatever the test scripted; the tests are about what the studio
sends (the prompt), what it keeps (drafts, alternatives, snapshots) and that nothing is
appended before the playtester accepts.
"""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection
from django.urls import reverse

from studio.memory.models import Job, LLMCall
from studio.saves.models import AlternativeStatus, DraftStatus, NarratorDraft, NarratorSnapshot
from studio.world.models import Event, UniverseMeta
from studio.saves.narrator import services
from studio.saves.narrator.prompt import DEFAULT_INSTRUCTIONS, build_narrator_prompt, render_instructions
from tests.llm_server import Reply, operation_of, user_prompt
from tests.plugins.narrator import STORY
from tests.support.narration import stream_all

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def tester(client, playtester):
    client.force_login(playtester)
    return client


def url(name, game_save, *args):
    return reverse(f"saves:{name}", args=[game_save.save_id, *args])


# -- the prompt -------------------------------------------------------------------------------


def test_instructions_fill_meta_drop_empty_lines_and_keep_unknown_placeholders():
    meta = {
        "player_character": "Wren",
        "tone": "grim",
        "season": "autumn",
        "character_card": '{"data": {"name": "Mira"}}',
    }
    text = render_instructions(DEFAULT_INSTRUCTIONS, meta)
    assert 'The player character ("you") is Wren.' in text and "Tone: grim" in text
    assert "Narration style:" not in text and "Era:" not in text  # unset: the line is left out
    assert "season: autumn" in text  # other meta through {{meta}}
    assert "character_card" not in text  # structured data, not prose
    custom = render_instructions("Speak as {{char}} to {{user}} in {{tone}} words. {{typo_key}}", meta)
    assert custom == "Speak as Mira to Wren in grim words. {{typo_key}}"


def test_prompt_has_meta_recent_turns_memory_and_the_action(game_save, meta, vector_memory):
    # A share of the recent turns that holds only the last turn: turn 2 is left to memory.
    UniverseMeta.objects.create(universe=meta, key="context_share_chapter", value="1")
    vector_memory.embed_chunk(game_save.save_id, 2, "Mira lends you ten silver crowns.")
    vector_memory.embed_chunk(game_save.save_id, 3, "Turn 3 text.")
    prompt = build_narrator_prompt(game_save=game_save, player_input="I ask Mira about the silver crowns")
    assert (
        "terse, present tense" in prompt.system
        and "Wren Halloway" in prompt.system
        and "season: late autumn" in prompt.system
    )
    assert prompt.template_is_default and prompt.turn_id == 4
    assert "Turn 3\n> input 3\nTurn 3 text." in prompt.user and "I ask Mira about the silver crowns" in prompt.user
    assert "Mira lends you ten silver crowns." in prompt.user  # the memory context (build_memory_context)
    assert prompt.shown_turns == [3] and prompt.context_record()["items"]
    # Nothing twice: turn 3 is shown in full, so its chunk is not repeated as memory.
    assert prompt.user.count("Turn 3 text.") == 1
    cut = next(i for i in prompt.memory.items if i.layer == "narrative" and i.ref["turn_id"] == 3)
    assert not cut.included and cut.cut.startswith("already in the prompt: turn 3")
    # From what changes least to what changes most: recent turns, then what the action recalled, then the action.
    user = prompt.user
    assert (
        user.index("## Recent turns") < user.index("## Recalled for this action") < user.index("## The player's action")
    )


def test_consecutive_prompts_share_their_beginning(game_save, meta, vector_memory):
    from studio.saves.services import turn_append

    first = build_narrator_prompt(game_save=game_save, player_input="I ask Mira about the silver crowns")
    turn_append(game_save=game_save, player_input="I ask Mira about the silver crowns", narrative="Mira shrugs.")
    second = build_narrator_prompt(game_save=game_save, player_input="I leave for the docks")
    before, after = first.system + first.user, second.system + second.user
    shared = next((i for i, (a, b) in enumerate(zip(before, after)) if a != b), len(before))
    # The instructions and the three turns shown before are the start of the next prompt too.
    assert before[:shared].endswith("Turn 3 text.\n\n")
    assert after[shared:].startswith("Turn 4\n> I ask Mira about the silver crowns\nMira shrugs.")


def test_the_author_template_replaces_the_default(game_save, meta):
    UniverseMeta.objects.create(
        universe=meta, key="narrator_instructions", value="You narrate for {{user}}. Style: {{narrator_style}}."
    )
    prompt = build_narrator_prompt(game_save=game_save, player_input="look")
    assert prompt.system == "You narrate for Wren Halloway. Style: terse, present tense."
    assert not prompt.template_is_default


def test_universe_as_code_carries_the_template(meta):
    from studio.universes.interchange.toml_io import export_universe, parse_document

    UniverseMeta.objects.create(universe=meta, key="narrator_instructions", value="Narrate {{tone}}ly.\nNever rush.")
    document = parse_document(export_universe(meta))
    assert document.meta_values()["narrator_instructions"] == "Narrate {{tone}}ly.\nNever rush."


# -- the flow: narrate, stream, accept / edit / regenerate / discard ----------------------------


def test_narrate_streams_and_appends_nothing_until_accepted(tester, game_save, meta, narrator):
    response = tester.post(url("narrate", game_save), {"player_input": "I knock at Mira's door"}, **HX)
    html = response.content.decode()
    draft = NarratorDraft.objects.get(game_save=game_save)
    assert 'id="narrator"' in html and "<html" not in html
    assert f'data-narrator-stream="{url("narrator_stream", game_save, draft.pk, 1)}"' in html
    assert draft.turn_id == 4 and draft.player_input == "I knock at Mira's door"
    assert stream_all(tester, game_save, draft) == STORY
    assert Event.objects.filter(game_save=game_save).count() == 3  # still nothing appended
    sent = next(r for r in narrator.server.requests if operation_of(r) == "narrate")
    assert sent["stream"] is True and "I knock at Mira's door" in user_prompt(sent)
    alternative = draft.alternatives.get()
    assert (alternative.status, alternative.text, alternative.model) == (AlternativeStatus.DONE, STORY, "test-model")
    assert alternative.completion_tokens == 5 and "Wren Halloway" in alternative.system_prompt
    assert LLMCall.objects.filter(game_save=game_save, operation="narrate").count() == 1
    # Streaming it again does nothing (the page reloaded, a second tab).
    assert stream_all(tester, game_save, draft) == ""
    panel = tester.get(url("narrator_draft", game_save, draft.pk), **HX).content.decode()
    assert "Accept as turn 4" in panel and "Rain drums on the harbour roofs." in panel

    response = tester.post(url("narrator_accept", game_save, draft.pk), {"number": 1, "narrative": STORY}, **HX)
    html = response.content.decode()
    assert response.status_code == 200 and 'id="console"' in html and "Turn 4 appended" in html
    event = Event.objects.get(game_save=game_save, turn_id=4)
    assert (event.player_input, event.narrative) == ("I knock at Mira's door", STORY)
    snapshot = NarratorSnapshot.objects.get(game_save=game_save, turn_id=4)
    assert not snapshot.edited and snapshot.model == "test-model" and snapshot.prompt_chars > 100
    assert snapshot.context["token_budget"] == 2000 and "items" in snapshot.context  # story so far included
    assert Job.objects.filter(game_save=game_save, turn_id=4).exists()  # the turn's memory jobs ran
    assert NarratorDraft.objects.get(pk=draft.pk).status == DraftStatus.ACCEPTED


def test_edit_before_accepting_keeps_what_the_model_wrote(tester, game_save, narrator):
    draft = services.narrator_draft_create(game_save=game_save, player_input="I wait")
    stream_all(tester, game_save, draft)
    tester.post(
        url("narrator_accept", game_save, draft.pk), {"number": 1, "narrative": "You wait. Nothing comes."}, **HX
    )
    assert Event.objects.get(game_save=game_save, turn_id=4).narrative == "You wait. Nothing comes."
    snapshot = NarratorSnapshot.objects.get(game_save=game_save, turn_id=4)
    assert snapshot.edited and snapshot.proposed == STORY
    page = tester.get(url("narrator_snapshot", game_save, 4)).content.decode()
    assert "What the narrator saw at turn 4" in page and "edited by the playtester" in page and "Rain drums" in page
    timeline = tester.get(url("timeline", game_save)).content.decode()
    assert url("narrator_snapshot", game_save, 4) in timeline and url("narrator_snapshot", game_save, 3) not in timeline


def test_regenerate_keeps_alternatives_and_one_is_chosen(tester, game_save, narrator):
    draft = services.narrator_draft_create(game_save=game_save, player_input="I look around")
    stream_all(tester, game_save, draft)
    narrator.reply = Reply(content="Fog hides the quay.")
    html = tester.post(url("narrator_regenerate", game_save, draft.pk), **HX).content.decode()
    assert (
        url("narrator_stream", game_save, draft.pk, 2) in html
        and 'id="draft-swipe-count" aria-live="polite">2/2' in html
    )
    assert stream_all(tester, game_save, draft, 2) == "Fog hides the quay."
    html = tester.post(url("narrator_choose", game_save, draft.pk), {"number": 1}, **HX).content.decode()
    assert "Rain drums on the harbour roofs." in html and "Fog hides the quay." not in html
    tester.post(url("narrator_accept", game_save, draft.pk), {"number": 1}, **HX)
    assert Event.objects.get(game_save=game_save, turn_id=4).narrative == STORY
    assert NarratorSnapshot.objects.get(game_save=game_save, turn_id=4).alternatives == 2


def test_discard_appends_nothing(tester, game_save, narrator):
    draft = services.narrator_draft_create(game_save=game_save, player_input="I leave")
    stream_all(tester, game_save, draft)
    html = tester.post(url("narrator_discard", game_save, draft.pk), **HX).content.decode()
    assert "Draft for turn 4 discarded" in html and "Bring it back" in html
    assert Event.objects.filter(game_save=game_save).count() == 3
    assert NarratorDraft.objects.get(pk=draft.pk).status == DraftStatus.DISCARDED
    with pytest.raises(services.NarratorError):
        services.narrator_accept(draft=NarratorDraft.objects.get(pk=draft.pk))


def test_without_javascript_the_post_narrates_to_the_end(tester, game_save, narrator):
    response = tester.post(url("narrate", game_save), {"player_input": "I sing"})
    assert response.status_code == 302
    page = tester.get(url("detail", game_save)).content.decode()
    assert "Rain drums on the harbour roofs." in page and "Accept as turn 4" in page
    assert 'name="narrative"' in page  # the edit field


def test_accept_after_the_save_moved_on_appends_nothing(tester, game_save, narrator):
    from studio.saves.services import turn_append

    draft = services.narrator_draft_create(game_save=game_save, player_input="I run")
    stream_all(tester, game_save, draft)
    turn_append(game_save=game_save, player_input="by hand", narrative="Written by hand.")
    with pytest.raises(services.TurnConflict):
        services.narrator_accept(draft=NarratorDraft.objects.get(pk=draft.pk))
    assert list(Event.objects.filter(game_save=game_save).values_list("turn_id", "narrative"))[-1] == (
        4,
        "Written by hand.",
    )
    assert not NarratorSnapshot.objects.exists()


# -- no half turn ---------------------------------------------------------------------------------


@pytest.mark.parametrize("cut", [{"end_after": 3}, {"error_after": 3}])
def test_a_cut_stream_leaves_no_half_turn(tester, game_save, narrator, cut):
    narrator.reply = Reply(content=STORY, **cut)
    draft = services.narrator_draft_create(game_save=game_save, player_input="I dive")
    text = stream_all(tester, game_save, draft)
    assert text and text != STORY  # some words arrived
    alternative = draft.alternatives.get()
    assert (
        alternative.status == AlternativeStatus.FAILED
        and alternative.text == text
        and "nothing was appended" in alternative.error
    )
    with pytest.raises(services.NarratorError):
        services.narrator_accept(draft=draft)
    assert Event.objects.filter(game_save=game_save).count() == 3
    panel = tester.get(url("narrator_draft", game_save, draft.pk), **HX).content.decode()
    assert "Accept as turn" not in panel and "not appended" in panel and "Regenerate" in panel


def test_a_request_killed_mid_narration_leaves_no_half_turn(tester, game_save, narrator):
    narrator.reply = Reply(content=STORY, chunk_delay=0.05)
    draft = services.narrator_draft_create(game_save=game_save, player_input="I dive")
    # The view streams this generator; when the client goes away Django closes it (GeneratorExit).
    deltas = services.narration_stream(alternative_id=draft.alternatives.get().pk)
    assert next(deltas)
    deltas.close()
    alternative = draft.alternatives.get()
    assert alternative.status == AlternativeStatus.CANCELLED and not alternative.acceptable
    assert Event.objects.filter(game_save=game_save).count() == 3
    assert narrator.server.disconnected.wait(5)  # the model's stream was closed too


# -- spend guard, no model -----------------------------------------------------------------------


def test_a_paused_save_says_so_and_calls_nothing(tester, game_save, narrator, settings):
    settings.AXIOM_LLM_CALLS_PER_HOUR = 1
    LLMCall.objects.create(game_save=game_save, operation="extract", model="test-model")
    html = tester.get(url("detail", game_save)).content.decode()
    assert "paused by the spend guard" in html
    draft = services.narrator_draft_create(game_save=game_save, player_input="I wait")
    assert stream_all(tester, game_save, draft) == ""
    alternative = draft.alternatives.get()
    assert alternative.status == AlternativeStatus.FAILED and "spend guard" in alternative.error
    assert not [r for r in narrator.server.requests if operation_of(r) == "narrate"]


@pytest.mark.parametrize("name", ["saves:detail", "memory:facts", "memory:beliefs", "memory:mental_models"])
def test_no_model_pages_of_a_living_save_say_how_to_connect_one(tester, game_save, settings, name):
    settings.AXIOM_LLM_BASE_URL = ""
    game_save.memory_mode = "living"
    game_save.save()
    page = tester.get(reverse(name, args=[game_save.save_id])).content.decode()
    assert "No language model is connected" in page
    for server in ("Ollama", "llama-server", "vLLM", "hosted endpoint", "AXIOM_LLM_BASE_URL=http://127.0.0.1:11434/v1"):
        assert server in page
    fragment = tester.get(reverse(name, args=[game_save.save_id]), **HX).content.decode()
    assert "No language model is connected" not in fragment or name == "saves:detail"
    settings.AXIOM_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    assert "No language model is connected" not in tester.get(reverse(name, args=[game_save.save_id])).content.decode()


def test_without_a_model_the_console_still_takes_a_turn_by_hand(tester, game_save, settings, eager_jobs, vector_memory):
    settings.AXIOM_LLM_BASE_URL = ""
    page = tester.get(url("detail", game_save)).content.decode()
    assert 'id="append-form"' in page and 'id="narrate-form"' not in page and "No language model is connected" in page
    response = tester.post(url("narrate", game_save), {"player_input": "I look"}, **HX)
    assert "No language model is connected" in response.content.decode() and not NarratorDraft.objects.exists()
    tester.post(url("turn_append", game_save), {"player_input": "x", "narrative": "By hand.", "expected_turn_id": 4})
    assert Event.objects.filter(game_save=game_save, turn_id=4).exists()


def test_retry_of_a_job_skipped_for_no_model_says_what_it_needs(tester, game_save, settings):
    from studio.memory.models import JobKind, JobStatus

    settings.AXIOM_LLM_BASE_URL = ""
    Job.objects.create(
        kind=JobKind.LIVING_TURN,
        game_save=game_save,
        turn_id=3,
        status=JobStatus.SKIPPED,
        progress="skipped: no LLM configured",
    )
    html = tester.get(reverse("memory:jobs", args=[game_save.save_id])).content.decode()
    assert "needs a language model: set <code>AXIOM_LLM_BASE_URL</code>" in html and "disabled" in html


# -- the prompt preview ---------------------------------------------------------------


def test_prompt_preview_page_and_fragment(tester, game_save, meta):
    page = tester.get(url("narrator_prompt", game_save), {"input": "I ask about the tide"})
    html = page.content.decode()
    assert (
        "<html" in html
        and "terse, present tense" in html
        and "I ask about the tide" in html
        and "narrator_instructions" in html
    )
    fragment = tester.get(url("narrator_prompt", game_save), {"input": "I ask about the tide"}, **HX).content.decode()
    assert "<html" not in fragment and 'id="prompt-system"' in fragment
    assert "Type an action" in tester.get(url("narrator_prompt", game_save)).content.decode()


# -- rewind, fork, the save file -----------------------------------------------------------------


def _snapshot(game_save, turn_id: int) -> NarratorSnapshot:
    return NarratorSnapshot.objects.create(
        game_save=game_save,
        turn_id=turn_id,
        player_input=f"input {turn_id}",
        proposed=f"Proposed {turn_id}.",
        model="test-model",
        latency_ms=12,
        prompt_tokens=100 + turn_id,
        completion_tokens=20,
        prompt_chars=400,
        system_prompt="You are the narrator.",
        user_prompt=f"## The player's action (turn {turn_id})",
        context={
            "token_budget": 5,
            "items": [
                {"layer": "lore", "text": "Port Vey", "tokens": 3, "reason": "rank 1", "included": True, "cut": ""},
                {
                    "layer": "fact",
                    "text": "Kaël owes",
                    "tokens": 9,
                    "reason": "focus",
                    "included": False,
                    "cut": "over budget: needs 9 tokens, 2 left",
                },
            ],
        },
    )


def test_rewind_drops_later_snapshots_and_fork_copies_earlier_ones(game_save, vector_memory):
    from studio.saves.checkpoints import CheckpointManager

    for turn in (1, 2, 3):
        _snapshot(game_save, turn)
    NarratorDraft.objects.create(game_save=game_save, turn_id=4, player_input="pending")
    manager = CheckpointManager(vector_memory=vector_memory)
    assert manager.preview(game_save, 1).counts["narrator_snapshots"] == 2
    fork = manager.fork(game_save, 2)
    copied = NarratorSnapshot.objects.filter(game_save=fork).order_by("turn_id")
    assert [s.turn_id for s in copied] == [1, 2]
    assert copied[1].context == NarratorSnapshot.objects.get(game_save=game_save, turn_id=2).context
    assert copied[1].prompt_tokens == 102 and copied[1].user_prompt.endswith("(turn 2)")
    result = manager.rewind(game_save, 1)
    assert result.counts["narrator_snapshots"] == 2
    assert list(NarratorSnapshot.objects.filter(game_save=game_save).values_list("turn_id", flat=True)) == [1]
    assert not NarratorDraft.objects.filter(game_save=game_save).exists()  # it was for turn 4
    assert NarratorSnapshot.objects.filter(game_save=fork).count() == 2  # the fork keeps its own


def test_snapshots_travel_in_the_save_file(game_save, universe):
    from studio.saves import portable
    from studio.saves.narrator.snapshots import snapshot_prompts

    _snapshot(game_save, 2)
    _snapshot(game_save, 3)
    data = portable.save_export(game_save=game_save).read()
    section = json.loads(data)["sections"]["narrator_snapshots"]
    assert section["optional"] is True and [i["turn_id"] for i in section["items"]] == [2, 3]
    imported = portable.save_import(universe=universe, data=data).game_save
    fields = ("turn_id", "player_input", "proposed", "model", "prompt_tokens", "context", "created_at")
    assert list(NarratorSnapshot.objects.filter(game_save=imported).values_list(*fields)) == list(
        NarratorSnapshot.objects.filter(game_save=game_save).values_list(*fields)
    )
    # The prompts are the same whole; the copy keeps turn 3's as a delta of turn 2's.
    assert snapshot_prompts(game_save=imported) == snapshot_prompts(game_save=game_save)
    assert NarratorSnapshot.objects.get(game_save=imported, turn_id=3).prompt_delta is not None
    document = json.loads(data)
    document["sections"]["narrator_snapshots"]["items"][1]["turn_id"] = 2
    with pytest.raises(portable.SaveFileError) as error:
        portable.save_import(universe=universe, data=json.dumps(document).encode())
    assert "turn 2 has two narrator snapshots" in str(error.value)
    document["sections"]["narrator_snapshots"]["items"][1]["turn_id"] = 9
    with pytest.raises(portable.SaveFileError) as error:
        portable.save_import(universe=universe, data=json.dumps(document).encode())
    assert "turn 9 does not exist" in str(error.value)


def test_an_alternative_already_streaming_is_not_streamed_again(tester, game_save, narrator):
    """Another tab (or a request that died) holds it: the panel offers no stream, only regenerate."""
    draft = services.narrator_draft_create(game_save=game_save, player_input="I wait")
    draft.alternatives.update(status=AlternativeStatus.STREAMING)
    panel = tester.get(url("narrator_draft", game_save, draft.pk), **HX).content.decode()
    assert "data-narrator-stream" not in panel and "being written by another request" in panel and "Regenerate" in panel
    assert stream_all(tester, game_save, draft) == ""
    assert not [r for r in narrator.server.requests if operation_of(r) == "narrate"]


def test_a_prompt_that_cannot_be_built_fails_the_alternative(tester, game_save, narrator, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("vector store gone")

    monkeypatch.setattr(services, "build_narrator_prompt", broken)
    draft = services.narrator_draft_create(game_save=game_save, player_input="I wait")
    assert stream_all(tester, game_save, draft) == ""
    alternative = draft.alternatives.get()
    assert alternative.status == AlternativeStatus.FAILED and "vector store gone" in alternative.error


def test_an_action_with_a_nul_character_is_a_clear_error_everywhere(tester, game_save, meta, narrator):
    """The preview, the narrate POST (htmx and without JavaScript) and so the stream never 500."""
    page = tester.get(url("narrator_prompt", game_save), {"input": "I open\x00 the door"})
    html = page.content.decode()
    assert page.status_code == 400 and "<html" in html and "cannot be used: Must not contain NUL characters" in html
    fragment = tester.get(url("narrator_prompt", game_save), {"input": "\x00"}, **HX)
    assert fragment.status_code == 200 and "cannot be used" in fragment.content.decode()  # htmx swaps 2xx only
    panel = tester.post(url("narrate", game_save), {"player_input": "I open\x00 the door"}, **HX)
    assert panel.status_code == 200 and "cannot be used" in panel.content.decode()
    response = tester.post(url("narrate", game_save), {"player_input": "\x00"})
    assert response.status_code == 302
    assert "cannot be used" in tester.get(url("detail", game_save)).content.decode()
    assert not NarratorDraft.objects.filter(game_save=game_save).exists()  # nothing to stream
    assert [r for r in narrator.server.requests if operation_of(r) == "narrate"] == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("headers_first", [False, True], ids=["answer-held-back", "first-word-held-back"])
def test_stop_before_the_first_word_ends_the_model_request(game_save, narrator, headers_first):
    """A CPU server reads the prompt for half a minute before its first word: a Stop ends that wait.

    Some servers answer only once the first word is ready (llama-cpp-python), others send
    the headers at once and the words later (llama.cpp's `llama-server`): both are stopped.
    """
    release = threading.Event()  # the scripted "model" answers only once released, after the test
    narrator.reply = Reply(content=STORY, chunk_delay=60) if headers_first else Reply(content=STORY, hold=release)
    draft = services.narrator_draft_create(game_save=game_save, player_input="I dive")
    alternative = draft.alternatives.get()

    def press_stop():
        try:
            assert narrator.server.wait_for("narrate", timeout=10)
            assert services.narration_stop(alternative=alternative, shown_text="")
        finally:
            connection.close()  # this thread's own connection

    stopper = threading.Thread(target=press_stop)
    stopper.start()
    try:
        deltas = list(services.narration_stream(alternative_id=alternative.pk))
        stopper.join()
        assert deltas == []
        assert narrator.server.disconnected.wait(5)  # the server saw the client go away...
        # ...before it sent a word: the stream ended while the model had not answered.
        assert narrator.server.stream_log == [{"deltas_sent": 0, "disconnected": True, "completed": False}]
        assert not release.is_set()
        alternative.refresh_from_db()
        assert alternative.status == AlternativeStatus.CANCELLED and alternative.error == services.STOPPED
        assert alternative.text == "" and alternative.system_prompt  # the prompt is kept
        assert len(narrator.server.requests_for("narrate")) == 1  # a Stop is not retried
        call = LLMCall.objects.get(game_save=game_save, operation="narrate")
        assert ("cancelled by the reader" if headers_first else "before the answer began") in call.error
        assert Event.objects.filter(game_save=game_save).count() == 3
    finally:
        release.set()
        stopper.join()
