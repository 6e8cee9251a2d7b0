"""Chapters: how they close, their summaries (job, no model, edits), arcs, rewind, fork, save file.

Through the real services: `turn_append` (scene change, turn limit), `chapter_close` (the
playtester), the `summarize_chapter` job on the scripted OpenAI-compatible server (nothing
here is a model's quality), `CheckpointManager.rewind` / `fork`, and the save file.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from studio.memory.chapters.models import Chapter, ChapterCloseReason, SummaryStatus
from studio.memory.chapters.selectors import open_chapter_start, top_summaries
from studio.memory.chapters.services import ChapterError, chapter_close, chapter_summarize_again, chapter_summary_edit
from studio.memory.models import Job, JobKind, LLMCall
from studio.saves import portable
from studio.saves.checkpoints import CheckpointManager
from studio.world.models import Save, UniverseMeta
from studio.saves.services import turn_append
from tests.llm_server import Reply, ScriptedLLMServer, json_reply, operation_of, user_prompt

pytestmark = pytest.mark.django_db


def meta(universe, **values):
    for key, value in values.items():
        UniverseMeta.objects.update_or_create(universe=universe, key=key, defaults={"value": str(value)})


def play(save, places: list[str], *, start: int = 1) -> None:
    for offset, place in enumerate(places):
        turn = start + offset
        turn_append(
            game_save=save,
            player_input=f"act {turn}",
            narrative=f"Turn {turn} happens in {place}.",
            state={"location": place, "day": turn},
        )


def spans(save) -> list[tuple]:
    return list(
        Chapter.objects.filter(game_save=save)
        .order_by("level", "first_turn")
        .values_list("level", "first_turn", "last_turn", "close_reason")
    )


def rows(save) -> list[tuple]:
    return list(
        Chapter.objects.filter(game_save=save)
        .order_by("level", "first_turn")
        .values_list(
            "level",
            "first_turn",
            "last_turn",
            "closed_turn",
            "close_reason",
            "close_note",
            "story_time_start",
            "story_time_end",
            "summary",
            "summary_status",
            "edited",
        )
    )


@pytest.fixture
def save(universe):
    meta(universe, chapter_turns=5, chapters_per_arc=2, chapter_min_turns=2)
    return Save.objects.create(universe=universe, name="Long play")


def test_a_scene_change_and_the_turn_limit_close_chapters(save, fake_vectors):
    play(save, ["harbour", "harbour", "harbour", "market", "market"])
    # The move to the market (turn 4) closed turns 1-3; the new chapter is open from turn 4.
    assert spans(save) == [(0, 1, 3, ChapterCloseReason.SCENE)]
    chapter = Chapter.objects.get(game_save=save)
    assert chapter.close_note == "location: harbour → market"
    assert (chapter.story_time_start, chapter.story_time_end, chapter.story_time) == ("day 1", "day 3", "day 1 – day 3")
    assert open_chapter_start(save) == 4
    play(save, ["market", "market", "market"], start=6)  # turn 8 is the open chapter's fifth turn: the limit
    assert spans(save)[1] == (0, 4, 8, ChapterCloseReason.LENGTH)
    # Two chapters roll up into an arc.
    assert (1, 1, 8, ChapterCloseReason.ROLLUP) in spans(save)


def test_the_open_chapters_number_and_start_in_one_query_or_from_rows_already_read(
    save, fake_vectors, django_assert_num_queries
):
    from studio.memory.chapters.selectors import chapters_for, open_chapter, open_start_of

    with django_assert_num_queries(1):
        assert open_chapter(save) == (1, 1)  # nothing closed yet
    play(save, ["harbour"] * 3 + ["market"] * 5 + ["mole"])  # 1-3 (scene), 4-8 (length), then an arc of both
    with django_assert_num_queries(1):
        assert open_chapter(save) == (3, 9)
    rows = list(chapters_for(save))
    with django_assert_num_queries(0):
        start = open_start_of(rows)
    assert start == open_chapter_start(save) == 9


def test_a_scene_change_in_a_young_chapter_does_not_close_it(save, fake_vectors):
    play(save, ["harbour", "market"])  # one turn: below chapter_min_turns
    assert spans(save) == []


def test_without_a_model_chapters_exist_and_say_no_summary_was_made(save, fake_vectors, settings):
    settings.AXIOM_LLM_BASE_URL = ""
    play(save, ["harbour"] * 3)
    chapter = chapter_close(game_save=save)
    assert (chapter.first_turn, chapter.last_turn, chapter.close_reason) == (1, 3, ChapterCloseReason.PLAYTESTER)
    assert chapter.summary_status == SummaryStatus.NO_MODEL and not chapter.has_summary
    assert not Job.objects.filter(game_save=save, kind=JobKind.SUMMARIZE_CHAPTER).exists()
    with pytest.raises(ChapterError, match="no turns yet"):
        chapter_close(game_save=save)  # the open chapter is empty
    with pytest.raises(ChapterError, match="No model"):
        chapter_summarize_again(chapter=chapter)


def summarizer(request):
    if operation_of(request) == "summarize":
        prompt = user_prompt(request)
        return json_reply({"summary": "SUMMARY OF " + prompt.splitlines()[0]})
    return Reply(status=400)


@pytest.fixture
def model(settings):
    server = ScriptedLLMServer(summarizer).start()
    settings.AXIOM_LLM_BASE_URL = server.base_url
    settings.AXIOM_LLM_MODEL = "test-model"
    settings.AXIOM_LLM_MAX_RETRIES = 1
    settings.AXIOM_LLM_TIMEOUT = 5
    yield server
    server.stop()


def test_a_closed_chapter_is_summarized_by_a_job_and_arcs_from_their_chapters(
    save, fake_vectors, eager_jobs, model, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        play(save, ["harbour"] * 3 + ["market"] * 3)
    with django_capture_on_commit_callbacks(execute=True):
        chapter_close(game_save=save)
    first, second = Chapter.objects.filter(game_save=save, level=0).order_by("first_turn")
    assert (
        first.summary == "SUMMARY OF Summarize this chapter, turns 1-3." and first.summary_status == SummaryStatus.DONE
    )
    assert first.summary_model == "test-model" and second.has_summary
    sent = [r for r in model.requests if operation_of(r) == "summarize"]
    assert "Turn 2\n> act 2\nTurn 2 happens in harbour." in user_prompt(sent[0])
    arc = Chapter.objects.get(game_save=save, level=1)
    assert arc.summary.startswith("SUMMARY OF Summarize this arc") and arc.has_summary
    assert "Turns 1-3: SUMMARY OF" in user_prompt(sent[-1])  # an arc is told from its chapters' summaries
    assert LLMCall.objects.filter(game_save=save, operation="summarize").count() == 3
    assert [r.pk for r in top_summaries(save, before_turn=99)] == [arc.pk]  # the arc covers its chapters


def test_an_edited_summary_is_an_override_that_no_job_writes_over(
    save, fake_vectors, eager_jobs, model, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        play(save, ["harbour"] * 3)
        chapter = chapter_close(game_save=save)
    chapter = chapter_summary_edit(chapter=Chapter.objects.get(pk=chapter.pk), text="You waited at the harbour.")
    assert chapter.edited and chapter.summary == "You waited at the harbour."
    assert chapter.generated_summary.startswith("SUMMARY OF")
    with pytest.raises(ChapterError, match="edited"):
        chapter_summarize_again(chapter=chapter)
    # Clearing the edit brings the model's summary back.
    chapter = chapter_summary_edit(chapter=chapter, text="")
    assert (
        not chapter.edited and chapter.summary.startswith("SUMMARY OF") and chapter.summary_status == SummaryStatus.DONE
    )
    with pytest.raises(ChapterError, match="at most"):
        chapter_summary_edit(chapter=chapter, text="x" * 20_001)


def test_a_fork_at_n_makes_the_chapter_summaries_that_were_pending_at_n(
    save, fake_vectors, eager_jobs, model, django_capture_on_commit_callbacks
):
    play(save, ["harbour"] * 3 + ["market"] * 2)  # turns 1-3 closed at turn 4; its summary job never ran
    source = Chapter.objects.get(game_save=save)
    assert source.summary_status == SummaryStatus.PENDING
    with django_capture_on_commit_callbacks(execute=True):
        fork = CheckpointManager(vector_memory=fake_vectors).fork(save, 5)
    copied = Chapter.objects.get(game_save=fork)
    assert copied.summary_status == SummaryStatus.DONE
    assert copied.summary == "SUMMARY OF Summarize this chapter, turns 1-3."
    job = Job.objects.get(game_save=fork, kind=JobKind.SUMMARIZE_CHAPTER)
    assert job.payload["chapter"] == copied.pk and job.timeline_generation == fork.timeline_generation
    source.refresh_from_db()
    assert source.summary_status == SummaryStatus.PENDING  # the source's own job is the source's


def test_a_fork_without_a_model_says_its_pending_summaries_have_none(save, fake_vectors, model, settings):
    play(save, ["harbour"] * 3 + ["market"] * 2)
    settings.AXIOM_LLM_BASE_URL = ""
    fork = CheckpointManager(vector_memory=fake_vectors).fork(save, 5)
    assert Chapter.objects.get(game_save=fork).summary_status == SummaryStatus.NO_MODEL
    assert not Job.objects.filter(game_save=fork, kind=JobKind.SUMMARIZE_CHAPTER).exists()


PLACES = ["harbour", "market", "bell"]


@settings(max_examples=8, deadline=None)
@given(
    places=st.lists(st.sampled_from(PLACES), min_size=3, max_size=10),
    closes=st.sets(st.integers(1, 10)),
    data=st.data(),
)
def test_property_rewind_to_n_gives_the_chapters_recorded_at_n_and_a_fork_continues_identically(
    universe, fake_vectors, django_capture_on_commit_callbacks, places, closes, data
):
    meta(universe, chapter_turns=4, chapters_per_arc=2, chapter_min_turns=2)
    save = Save.objects.create(universe=universe, name="P")
    recorded = {0: []}
    for turn, place in enumerate(places, start=1):
        play(save, [place], start=turn)
        if turn in closes:
            try:
                chapter_close(game_save=save)
            except ChapterError:
                pass
            else:
                chapter_summary_edit(
                    chapter=Chapter.objects.get(game_save=save, level=0, last_turn=turn), text=f"edited {turn}"
                )
        recorded[turn] = rows(save)
    n = data.draw(st.integers(min_value=0, max_value=len(places) - 1), label="rewind to")
    with django_capture_on_commit_callbacks(execute=True):
        fork = CheckpointManager(vector_memory=fake_vectors).fork(save, n, name="fork")
    assert rows(fork) == recorded[n]
    with django_capture_on_commit_callbacks(execute=True):
        result = CheckpointManager(vector_memory=fake_vectors).rewind(save, n)
    assert rows(save) == recorded[n]
    assert result.counts["chapters"] == len(recorded[len(places)]) - len(recorded[n])
    # Played on the same way, the rewound save and the fork hold the same chapters.
    more = data.draw(st.lists(st.sampled_from(PLACES), min_size=1, max_size=6), label="then")
    play(save, more, start=n + 1)
    play(fork, more, start=n + 1)
    assert rows(save) == rows(fork)


def test_the_save_file_carries_chapters_and_refuses_overlaps(save, fake_vectors, settings):
    settings.AXIOM_LLM_BASE_URL = ""
    play(save, ["harbour"] * 3 + ["market"] * 2)
    chapter_summary_edit(chapter=Chapter.objects.get(game_save=save), text="You waited at the harbour.")
    data = portable.save_export(game_save=save).read()
    document = json.loads(data)
    result = portable.save_import(universe=save.universe, data=data)
    assert rows(result.game_save) == rows(save) and result.counts["chapters"] == 1
    section = document["sections"]["chapters"] if "sections" in document else document["chapters"]
    items = section["items"] if isinstance(section, dict) else section
    items.append(dict(items[0], first_turn=2, last_turn=4))
    with pytest.raises(portable.SaveFileError, match="overlap"):
        portable.save_import(universe=save.universe, data=json.dumps(document).encode())


def test_recent_turns_are_dated_when_their_story_time_changes_and_the_window_opens_dated(universe, fake_vectors):
    from studio.memory.chapters.story import story_items
    from studio.memory.recall.context_items import ContextItem

    game_save = Save.objects.create(universe=universe, name="Dated")
    for turn, date in enumerate(["8 May, 2023"] * 3 + ["9 May, 2023"] * 2, start=1):
        turn_append(game_save=game_save, player_input="", narrative=f"Line {turn}.", state={"date": date})

    def shown(budget):
        story = story_items(
            game_save,
            horizon=5,
            token_budget=budget,
            shares={"chapter": 100},
            make_item=ContextItem.of,
            fill=lambda text: text,
        )
        return [i.text.split("\n")[0] for i in story.turns if i.included]

    assert shown(10_000) == ["Turn 1 (8 May, 2023)", "Turn 2", "Turn 3", "Turn 4 (9 May, 2023)", "Turn 5"]
    # A window that moved past turn 4 opens on turn 5, dated though turn 4 had the same date.
    assert shown(14) == ["Turn 5 (9 May, 2023)"]
