"""Timeline: turns with their facts and job state; editing a turn's narrative."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from studio.memory.models import Fact, Job, JobKind, JobStatus
from studio.world.models import Event, MemoryMode

pytestmark = pytest.mark.django_db


def timeline_url(game_save):
    return reverse("saves:timeline", args=[game_save.save_id])


def test_timeline_shows_facts_and_job_state_per_turn(client, playtester, game_save):
    Fact.objects.create(
        game_save=game_save, turn_id=2, statement="Mira lends Kaël ten crowns.", entities=["Mira", "Kaël"]
    )
    Job.objects.create(kind=JobKind.EMBED_TURN, game_save=game_save, turn_id=2, status=JobStatus.DONE)
    Job.objects.create(
        kind=JobKind.LIVING_TURN, game_save=game_save, turn_id=2, status=JobStatus.FAILED, error="LLM down"
    )
    Job.objects.create(kind=JobKind.EMBED_TURN, game_save=game_save, turn_id=3, status=JobStatus.RUNNING)
    client.force_login(playtester)
    html = client.get(timeline_url(game_save)).content.decode()
    turn2 = html[html.index('id="turn-2"') : html.index('id="turn-1"')]
    assert "Mira lends Kaël ten crowns." in turn2 and "jobs failed" in turn2 and "LLM down" in turn2
    turn3 = html[html.index('id="turn-3"') : html.index('id="turn-2"')]
    assert "jobs running" in turn3 and 'hx-trigger="every 2s"' in turn3  # polls while running
    assert 'hx-trigger="every 2s"' not in turn2


def test_timeline_fragment_and_pagination(client, playtester, game_save):
    for turn in range(4, 46):
        Event.objects.create(game_save=game_save, turn_id=turn, narrative=f"Turn {turn} text.")
    game_save.current_turn = 45
    game_save.save()
    client.force_login(playtester)
    first = client.get(timeline_url(game_save)).content.decode()
    assert "Turn 45 text." in first and "Turn 25 text." not in first and "page 1 of 3" in first
    fragment = client.get(timeline_url(game_save), {"page": 2}, HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith('<div id="turns">') and "<html" not in fragment
    assert "Turn 25 text." in fragment and "Turn 45 text." not in fragment


def test_timeline_query_count_does_not_grow_with_facts_and_jobs(client, playtester, game_save):
    client.force_login(playtester)
    client.get(timeline_url(game_save))
    with CaptureQueriesContext(connection) as few:
        client.get(timeline_url(game_save))
    for turn in (1, 2, 3):
        for i in range(5):
            Fact.objects.create(game_save=game_save, turn_id=turn, statement=f"fact {turn}.{i}")
        Job.objects.create(kind=JobKind.EMBED_TURN, game_save=game_save, turn_id=turn, status=JobStatus.DONE)
    with CaptureQueriesContext(connection) as many:
        client.get(timeline_url(game_save))
    assert len(many) == len(few)


def test_timeline_query_count_does_not_grow_with_turns(client, playtester, game_save):
    # Each turn shows its presence picker: the characters and the page's presence rows are
    # read once for the page, not once per turn.
    client.force_login(playtester)
    client.get(timeline_url(game_save))
    with CaptureQueriesContext(connection) as few:
        client.get(timeline_url(game_save))
    for turn in range(4, 10):
        Event.objects.create(
            game_save=game_save, turn_id=turn, player_input=f"input {turn}", narrative=f"Turn {turn} text."
        )
    game_save.current_turn = 9
    game_save.save()
    with CaptureQueriesContext(connection) as many:
        html = client.get(timeline_url(game_save)).content.decode()
    assert html.count('data-presence-turn="') == 9
    assert len(many) == len(few)


def test_turn_fragment_stops_polling_when_jobs_settle(client, playtester, game_save):
    job = Job.objects.create(kind=JobKind.EMBED_TURN, game_save=game_save, turn_id=2, status=JobStatus.RUNNING)
    client.force_login(playtester)
    url = reverse("saves:turn_detail", args=[game_save.save_id, 2])
    running = client.get(url, HTTP_HX_REQUEST="true")
    assert running.status_code == 200 and "jobs running" in running.content.decode()
    job.status = JobStatus.DONE
    job.save()
    done = client.get(url, HTTP_HX_REQUEST="true")
    assert done.status_code == 286 and "jobs done" in done.content.decode()
    page = client.get(url)
    assert page.status_code == 200 and "<html" in page.content.decode() and "Turn 2 text." in page.content.decode()


def test_edit_narrative_form_full_page_and_fragment(client, playtester, game_save):
    client.force_login(playtester)
    url = reverse("saves:turn_edit", args=[game_save.save_id, 2])
    page = client.get(url)
    assert (
        page.status_code == 200
        and "<html" in page.content.decode()
        and "Turn 2 text.</textarea>" in page.content.decode()
    )
    fragment = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith('<li id="turn-2"') and "<textarea" in fragment


def test_edit_narrative_updates_the_turn_and_queues_reextraction(client, playtester, game_save):
    game_save.memory_mode = MemoryMode.LIVING
    game_save.save()
    client.force_login(playtester)
    url = reverse("saves:turn_edit", args=[game_save.save_id, 2])
    response = client.post(url, {"narrative": "Kaël never paid."}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200 and "Kaël never paid." in html and "edited" in html and "<textarea" not in html
    assert Event.objects.get(game_save=game_save, turn_id=2).narrative == "Kaël never paid."
    living = Job.objects.get(game_save=game_save, turn_id=2, kind=JobKind.LIVING_TURN)
    assert living.payload.get("reextract") is True
    assert Job.objects.filter(game_save=game_save, turn_id=2, kind=JobKind.EMBED_TURN).exists()
    redirect = client.post(url, {"narrative": "Again."})
    assert redirect.status_code == 302 and redirect["Location"].endswith("#turn-2")


def test_edit_narrative_rejects_empty_text(client, playtester, game_save):
    client.force_login(playtester)
    url = reverse("saves:turn_edit", args=[game_save.save_id, 2])
    response = client.post(url, {"narrative": " "}, HTTP_HX_REQUEST="true")
    assert "errorlist" in response.content.decode()
    assert Event.objects.get(game_save=game_save, turn_id=2).narrative == "Turn 2 text."


def test_unknown_turn_is_404(client, playtester, game_save):
    client.force_login(playtester)
    assert client.get(reverse("saves:turn_detail", args=[game_save.save_id, 99])).status_code == 404
    assert client.post(reverse("saves:turn_edit", args=[game_save.save_id, 99]), {"narrative": "x"}).status_code == 404


def test_timeline_and_turn_pages_list_each_turns_chunk_ids_with_a_why_not_link(
    client, playtester, game_save, vector_memory
):
    """Each turn shows the ids of its narrative chunks, each linked to the search page with the
    id prefilled (the "Why not?" form asks for one); lore chunks and other saves' are left out."""
    ids = vector_memory.embed_chunks(
        game_save.save_id,
        [
            {"turn_id": 1, "text": "Kaël docks at Port Vey."},
            {"turn_id": 2, "text": "Mira lends Kaël ten crowns."},
            {
                "turn_id": 0,
                "text": "Port Vey is a harbour town.",
                "chunk_type": "lore",
                "metadata_extra": {"entry_id": "port-vey"},
            },
        ],
    )
    vector_memory.embed_chunks("othersave", [{"turn_id": 2, "text": "Elsewhere."}])
    client.force_login(playtester)
    search = reverse("memory:playground", args=[game_save.save_id])
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        html = client.get(timeline_url(game_save), **headers).content.decode()
        turn2 = html[html.index('id="turn-2"') : html.index('id="turn-1"')]
        turn1 = html[html.index('id="turn-1"') :]
        assert f'<code title="chunk id">{ids[1]}</code>' in turn2 and f'href="{search}?chunk_id={ids[1]}"' in turn2
        assert f'href="{search}?chunk_id={ids[0]}"' in turn1 and ids[2] not in html
        turn3 = html[html.index('id="turn-3"') : html.index('id="turn-2"')]
        assert "No memory chunk for this turn yet" in turn3 and "chunk_id=" not in turn3
    turn_url = reverse("saves:turn_detail", args=[game_save.save_id, 2])
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        html = client.get(turn_url, **headers).content.decode()
        assert f'href="{search}?chunk_id={ids[1]}"' in html and "Why not this turn?" in html
    # The link lands on the search page with the chunk filled in.
    landing = client.get(f"{search}?chunk_id={ids[1]}").content.decode()
    assert f'id="why-not-chunk" value="{ids[1]}"' in landing


def test_timeline_shows_without_chunk_ids_when_the_store_fails(client, playtester, game_save, monkeypatch):
    def broken():
        raise RuntimeError("store down")

    monkeypatch.setattr("studio.memory.vector.get_vector_memory", broken)
    client.force_login(playtester)
    response = client.get(timeline_url(game_save))
    html = response.content.decode()
    assert (
        response.status_code == 200
        and 'id="turn-3"' in html
        and "Memory chunk" not in html
        and "No memory chunk" not in html
    )


def test_the_timeline_shows_the_chapters_and_arcs_as_bands_linking_to_them(client, game_save, django_user_model):
    from studio.memory.chapters.models import Chapter, SummaryStatus

    for turn in range(4, 11):
        Event.objects.create(game_save=game_save, turn_id=turn, narrative=f"Turn {turn} text.")
    game_save.current_turn = 10
    game_save.save()
    first = Chapter.objects.create(
        game_save=game_save,
        first_turn=1,
        last_turn=4,
        closed_turn=5,
        close_reason="scene",
        summary="You reach the harbour.",
        summary_status=SummaryStatus.DONE,
    )
    second = Chapter.objects.create(
        game_save=game_save, first_turn=5, last_turn=8, closed_turn=8, close_reason="length"
    )
    arc = Chapter.objects.create(
        game_save=game_save, level=1, first_turn=1, last_turn=8, closed_turn=8, close_reason="rollup"
    )
    reader = django_user_model.objects.create_user("reader", password="x")
    game_save.universe.members.add(reader)
    client.force_login(reader)  # reading the save is enough to see its chapters
    html = client.get(timeline_url(game_save)).content.decode()
    chapters_url = reverse("saves:chapters", args=[game_save.save_id])
    assert "Turns 1–10: 2 closed chapters in 1 arc;" in html and "the open chapter runs from turn 9." in html
    bands = html[html.index('id="timeline-chapters-h"') : html.index('id="turns"')]
    # The arc row first, then the chapters; each band a named link to its chapter on the Chapters page.
    assert bands.index('aria-label="Arcs (level 1)"') < bands.index('aria-label="Chapters"')
    for row, label in (
        (first, "Chapter turns 1–4: Summarized"),
        (second, "Chapter turns 5–8: Summary pending"),
        (arc, "Arc turns 1–8: Summary pending"),
    ):
        assert f'<a href="{chapters_url}#chapter-{row.pk}" aria-label="{label}">' in bands
    # Drawn with SVG attributes (x and width in percent of the save's turns), never a style attribute.
    assert '<rect x="40.0%" y="1" width="40.0%"' in bands and "style=" not in bands
    # A page of turns (htmx) is the turns only: the bands stay where they are.
    fragment = client.get(timeline_url(game_save), HTTP_HX_REQUEST="true").content.decode()
    assert "timeline-chapters" not in fragment and "Turn 10 text." in fragment


def test_the_timeline_says_when_no_chapter_has_closed(client, playtester, game_save):
    client.force_login(playtester)
    html = client.get(timeline_url(game_save)).content.decode()
    assert "No chapter has closed yet: the turns so far are the open chapter" in html and "chapter-bands" not in html
