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
