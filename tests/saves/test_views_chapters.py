"""The Chapters page: bands, summaries, close / edit / summarise again, and who may do what."""

from __future__ import annotations

import pytest
from django.urls import reverse

from studio.memory.chapters.models import Chapter, SummaryStatus

pytestmark = pytest.mark.django_db


def url(name, save, *args):
    return reverse(f"saves:{name}", args=[save.save_id, *args])


def test_a_playtester_closes_a_chapter_and_edits_its_summary(client, playtester, game_save, settings):
    settings.AXIOM_LLM_BASE_URL = ""
    client.force_login(playtester)
    page = client.get(url("chapters", game_save)).content.decode()
    assert "No chapter has closed yet." in page and "The open chapter runs from turn <strong>1</strong>" in page
    response = client.post(url("chapter_close", game_save), {"note": "the harbour scene ends"})
    assert response.status_code == 302
    chapter = Chapter.objects.get(game_save=game_save)
    assert (chapter.first_turn, chapter.last_turn, chapter.summary_status) == (1, 3, SummaryStatus.NO_MODEL)
    page = client.get(url("chapters", game_save)).content.decode()
    assert "Chapter: turns 1–3" in page and "No summary was made: no model is configured" in page
    assert 'href="#chapter-%d"' % chapter.pk in page  # its band on the timeline
    client.post(url("chapter_edit", game_save, chapter.pk), {"action": "edit", "summary": "You wait at the harbour."})
    chapter.refresh_from_db()
    assert chapter.edited and chapter.summary == "You wait at the harbour."
    page = client.get(url("chapters", game_save)).content.decode()
    assert "You wait at the harbour." in page and ">edited<" in page
    # Closing an empty open chapter says why on the page; nothing is written.
    page = client.post(url("chapter_close", game_save), follow=True).content.decode()
    assert "no turns yet" in page and Chapter.objects.filter(game_save=game_save).count() == 1


def test_a_reader_sees_the_chapters_but_cannot_close_one(client, game_save, django_user_model):
    reader = django_user_model.objects.create_user("reader", password="x")
    game_save.universe.members.add(reader)
    client.force_login(reader)
    page = client.get(url("chapters", game_save)).content.decode()
    assert "Chapters and arcs" in page and "chapter-close-form" not in page
    assert client.post(url("chapter_close", game_save)).status_code == 403
    assert not Chapter.objects.filter(game_save=game_save).exists()


def close_on_console(client, save, expected_turn, *, htmx=True):
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    return client.post(url("chapter_close", save), {"next": "console", "expected_turn": expected_turn}, **headers)


def test_the_console_closes_the_open_chapter_and_says_what_happened(client, playtester, game_save, settings):
    settings.AXIOM_LLM_BASE_URL = ""
    client.force_login(playtester)
    page = client.get(url("detail", game_save)).content.decode()
    assert "The open chapter runs from turn 1 to turn 3." in page and "Close chapter 1 at turn 3" in page
    assert 'hx-target="#console-chapter"' in page
    fragment = close_on_console(client, game_save, 3).content.decode()
    # The htmx answer is the chapter card only, with what happened and the next chapter's state.
    assert (
        fragment.lstrip().startswith('<section class="drawer-section card" id="console-chapter"')
        and "Memory jobs" not in fragment
    )
    assert (
        "Chapter 1 (turns 1–3) closed at turn 3; no summary will be made: no model is connected (AXIOM_LLM_BASE_URL)."
    ) in fragment
    assert "Chapter 2</h3>" in fragment and "The open chapter has no turns yet: it starts with turn 4." in fragment
    assert 'id="chapter-close" disabled' in fragment
    chapter = Chapter.objects.get(game_save=game_save)
    assert (chapter.first_turn, chapter.last_turn, chapter.summary_status, chapter.close_reason) == (
        1,
        3,
        "no_model",
        "playtester",
    )
    # Again on the now empty chapter: the error says why, nothing more is written.
    fragment = close_on_console(client, game_save, 3).content.decode()
    assert (
        'role="alert"' in fragment and "The open chapter has no turns yet: play a turn before closing it." in fragment
    )
    assert Chapter.objects.filter(game_save=game_save).count() == 1


def test_a_close_with_a_model_queues_the_summary_and_names_the_arc_it_completes(
    client, playtester, game_save, settings
):
    from studio.memory.models import Job, JobKind
    from studio.world.models import UniverseMeta

    settings.AXIOM_LLM_BASE_URL = "http://127.0.0.1:9/v1"  # configured; the queued job is not run here
    UniverseMeta.objects.create(universe=game_save.universe, key="chapters_per_arc", value="2")
    Chapter.objects.create(
        game_save=game_save,
        first_turn=1,
        last_turn=2,
        closed_turn=2,
        close_reason="playtester",
        summary="You set out.",
        summary_status=SummaryStatus.DONE,
    )
    client.force_login(playtester)
    fragment = close_on_console(client, game_save, 3).content.decode()
    assert "Chapter 2 (turns 3–3) closed at turn 3; its summary is queued. It completes arc 1 (turns 1–3)." in fragment
    chapter = Chapter.objects.get(game_save=game_save, level=0, first_turn=3)
    assert Job.objects.filter(kind=JobKind.SUMMARIZE_CHAPTER, payload__chapter=chapter.pk).exists()
    assert Chapter.objects.filter(game_save=game_save, level=1, first_turn=1, last_turn=3).exists()


def test_the_console_closes_nothing_when_the_save_moved_since_the_page_was_loaded(
    client, playtester, game_save, settings
):
    settings.AXIOM_LLM_BASE_URL = ""
    client.force_login(playtester)
    fragment = close_on_console(client, game_save, 2).content.decode()  # the page showed turn 2; the save is at 3
    assert "The save is at turn 3 now, not turn 2 as this page showed: no chapter was closed." in fragment
    assert "Close chapter 1 at turn 3" in fragment  # the card shows where the save stands now
    assert not Chapter.objects.filter(game_save=game_save).exists()


def test_without_htmx_the_console_close_redirects_to_the_console_with_the_message(
    client, playtester, game_save, settings
):
    settings.AXIOM_LLM_BASE_URL = ""
    client.force_login(playtester)
    response = close_on_console(client, game_save, 3, htmx=False)
    assert response.status_code == 302 and response["Location"] == url("detail", game_save)
    page = client.get(response["Location"]).content.decode()
    assert "Chapter 1 (turns 1–3) closed at turn 3; no summary will be made" in page


def test_a_failed_close_writes_nothing(client, playtester, game_save, settings, monkeypatch):
    from studio.memory.chapters import services

    settings.AXIOM_LLM_BASE_URL = "http://127.0.0.1:9/v1"

    def broken_queue(**kwargs):
        raise RuntimeError("the job ledger is unavailable")

    monkeypatch.setattr(services, "enqueue_summary", broken_queue)
    client.force_login(playtester)
    client.raise_request_exception = True
    with pytest.raises(RuntimeError):
        close_on_console(client, game_save, 3)
    assert not Chapter.objects.filter(game_save=game_save).exists()  # the row went with the failed transaction


def test_a_reader_sees_the_open_chapter_on_the_console_but_cannot_close_it(client, game_save, django_user_model):
    reader = django_user_model.objects.create_user("reader", password="x")
    game_save.universe.members.add(reader)
    client.force_login(reader)
    page = client.get(url("detail", game_save)).content.decode()
    assert "The open chapter runs from turn 1 to turn 3." in page and 'id="chapter-close"' not in page
    assert close_on_console(client, game_save, 3).status_code == 403
    assert not Chapter.objects.filter(game_save=game_save).exists()
