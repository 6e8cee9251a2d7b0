"""The save's jobs page, its polling fragment, retry, and the admin lists."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.urls import reverse

import studio.memory.admin_jobs  # noqa: F401 - registers the admin classes if admin.py has not yet
from studio.memory.models import Job, JobKind, JobStatus, LLMCall

pytestmark = pytest.mark.django_db


@pytest.fixture
def failed_job(game_save):
    return Job.objects.create(
        kind=JobKind.LIVING_TURN,
        game_save=game_save,
        universe=game_save.universe,
        turn_id=3,
        status=JobStatus.FAILED,
        error="LLMUnavailable: HTTP 500",
        attempts=3,
    )


def test_full_page_lists_jobs(client, playtester, game_save, failed_job):
    client.force_login(playtester)
    response = client.get(reverse("memory:jobs", args=[game_save.save_id]))
    assert response.status_code == 200
    html = response.content.decode()
    assert "<h1" in html and f'id="job-{failed_job.pk}"' in html
    assert "LLMUnavailable: HTTP 500" in html and "Retry" in html


def test_fragment_stops_polling_when_idle(client, playtester, game_save, failed_job):
    client.force_login(playtester)
    response = client.get(reverse("memory:jobs", args=[game_save.save_id]), HTTP_HX_REQUEST="true")
    assert response.status_code == 286
    html = response.content.decode()
    assert "<h1" not in html and html.lstrip().startswith('<div id="jobs"')
    assert "hx-trigger" not in html


def test_fragment_polls_while_active(client, playtester, game_save):
    Job.objects.create(
        kind=JobKind.EMBED_TURN, game_save=game_save, turn_id=3, status=JobStatus.RUNNING, progress="embedding"
    )
    client.force_login(playtester)
    response = client.get(reverse("memory:jobs", args=[game_save.save_id]), HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert 'hx-trigger="every 2s"' in response.content.decode() and "embedding" in response.content.decode()


def test_retry_requeues_the_job(
    client, playtester, game_save, failed_job, settings, django_capture_on_commit_callbacks
):
    settings.AXIOM_JOBS_EAGER = False
    settings.REDIS_URL = ""
    client.force_login(playtester)
    url = reverse("memory:job_retry", args=[game_save.save_id, failed_job.pk])
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(url, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and f"Job {failed_job.pk} queued again." in response.content.decode()
    failed_job.refresh_from_db()
    assert failed_job.status == JobStatus.QUEUED and failed_job.error == "" and len(callbacks) == 1


def test_retry_without_htmx_redirects(client, playtester, game_save, failed_job, django_capture_on_commit_callbacks):
    client.force_login(playtester)
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(reverse("memory:job_retry", args=[game_save.save_id, failed_job.pk]))
    assert response.status_code == 302 and response.url == reverse("memory:jobs", args=[game_save.save_id])


def test_retry_needs_a_playtester(client, outsider, universe, game_save, failed_job):
    url = reverse("memory:job_retry", args=[game_save.save_id, failed_job.pk])
    client.force_login(outsider)
    assert client.post(url).status_code == 404  # cannot even see the save
    universe.members.add(outsider)  # a member without a role may look, not act
    assert client.get(reverse("memory:jobs", args=[game_save.save_id])).status_code == 200
    assert client.post(url).status_code == 403
    failed_job.refresh_from_db()
    assert failed_job.status == JobStatus.FAILED


def test_retry_of_another_saves_job_is_404(client, playtester, game_save, universe):
    from studio.world.models import Save

    other = Save.objects.create(universe=universe, name="Other")
    job = Job.objects.create(kind=JobKind.EMBED_TURN, game_save=other, status=JobStatus.FAILED)
    client.force_login(playtester)
    assert client.post(reverse("memory:job_retry", args=[game_save.save_id, job.pk])).status_code == 404


def test_admin_lists_jobs_and_llm_calls(client, staff_user, game_save, failed_job):
    LLMCall.objects.create(game_save=game_save, job=failed_job, operation="extract", model="m", error="HTTP 500")
    assert Job in admin.site._registry and LLMCall in admin.site._registry
    client.force_login(staff_user)
    jobs_page = client.get(reverse("admin:memory_job_changelist"))
    assert (
        jobs_page.status_code == 200 and "Living memory (extract, consolidate, reflect)" in jobs_page.content.decode()
    )
    calls_page = client.get(reverse("admin:memory_llmcall_changelist"))
    assert calls_page.status_code == 200 and "HTTP 500" in calls_page.content.decode()


def test_after_a_rewind_the_jobs_of_dropped_turns_show_as_abandoned_not_done(
    client, playtester, game_save, fake_vectors
):
    from studio.saves.checkpoints import CheckpointManager
    from studio.world.models import Event

    events = {e.turn_id: e.pk for e in Event.objects.filter(game_save=game_save)}
    jobs = {
        turn: Job.objects.create(
            kind=JobKind.EMBED_TURN,
            game_save=game_save,
            turn_id=turn,
            status=JobStatus.DONE,
            payload={"event": events[turn]},
            timeline_generation=game_save.timeline_generation,
        )
        for turn in (1, 2, 3)
    }
    CheckpointManager(vector_memory=fake_vectors).rewind(game_save, 1)
    # Turn 2 is played again: its new job is live, the old one stays abandoned.
    from studio.saves.services import turn_append

    turn_append(game_save=game_save, player_input="again", narrative="Turn 2, the second time.")
    client.force_login(playtester)
    html = client.get(reverse("memory:jobs", args=[game_save.save_id])).content.decode()
    assert f'id="job-{jobs[1].pk}" data-status="done">' in html  # a kept turn's job stays Done
    for turn in (2, 3):
        row = html.split(f'id="job-{jobs[turn].pk}"')[1].split("</tr>")[0]
        assert 'data-abandoned="1"' in row and "Abandoned" in row and ">Done<" not in row and "Retry" not in row
        assert "dropped by a rewind" in row
    assert "played again since" in html.split(f'id="job-{jobs[2].pk}"')[1].split("</tr>")[0]
    new_job = Job.objects.filter(game_save=game_save, turn_id=2).exclude(pk=jobs[2].pk).first()
    assert new_job is not None and "data-abandoned" not in html.split(f'id="job-{new_job.pk}"')[1].split("</tr>")[0]
