"""`job_retry` decides, under the job's lock, whether a job can be retried; callers only map its error.

A queued, running or done job raises `JobNotRetryable` and is left as it is. The Jobs page
turns the error into a note, the API into 409 `conflict`, the admin action skips the job:
none of them checks the status itself, so a job that finished between their read and the
retry is refused, not reported as retried.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import RequestFactory
from django.urls import reverse

from studio.api.services import api_token_create
from studio.memory import jobs
from studio.memory.models import Job, JobKind, JobStatus

pytestmark = pytest.mark.django_db


def make_job(game_save, status: str, **fields) -> Job:
    return Job.objects.create(
        kind=JobKind.LIVING_TURN, game_save=game_save, universe=game_save.universe, turn_id=3, status=status, **fields
    )


@pytest.mark.parametrize("status", [JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.DONE])
def test_a_job_that_is_not_failed_skipped_or_paused_raises_and_is_left_as_it_is(game_save, status):
    job = make_job(game_save, status, progress="as it was", attempts=2)
    with pytest.raises(jobs.JobNotRetryable) as refused:
        jobs.job_retry(job=job)
    assert refused.value.job.pk == job.pk and refused.value.job.status == status
    assert f"Job {job.pk} is {status}" in str(refused.value)
    job.refresh_from_db()
    assert (job.status, job.progress, job.attempts) == (status, "as it was", 2)


@pytest.mark.parametrize("status", [JobStatus.FAILED, JobStatus.SKIPPED, JobStatus.PAUSED])
def test_a_failed_skipped_or_paused_job_is_queued_again(game_save, status, django_capture_on_commit_callbacks):
    job = make_job(game_save, status, error="boom", attempts=3)
    with django_capture_on_commit_callbacks(execute=False):
        retried = jobs.job_retry(job=job)
    assert (retried.status, retried.error, retried.attempts) == (JobStatus.QUEUED, "", 0)


def test_the_status_under_the_lock_decides_not_the_callers_copy(game_save):
    stale = make_job(game_save, JobStatus.FAILED)
    Job.objects.filter(pk=stale.pk).update(status=JobStatus.DONE)  # a runner finished it meanwhile
    with pytest.raises(jobs.JobNotRetryable) as refused:
        jobs.job_retry(job=stale)
    assert refused.value.job.status == JobStatus.DONE
    assert Job.objects.get(pk=stale.pk).status == JobStatus.DONE


@pytest.fixture
def finished_meanwhile(game_save, monkeypatch):
    """A job the caller read as failed, done in the database by the time it retries."""
    from studio.memory import selectors

    job = make_job(game_save, JobStatus.FAILED)
    stale = Job.objects.get(pk=job.pk)
    Job.objects.filter(pk=job.pk).update(status=JobStatus.DONE)
    monkeypatch.setattr(selectors, "job_get", lambda *, game_save, job_id: stale if job_id == job.pk else None)
    return job


def test_the_api_answers_409_for_a_job_that_finished_meanwhile(client, playtester, game_save, finished_meanwhile):
    _, key = api_token_create(user=playtester, name="retry")
    response = client.post(
        f"/api/v1/saves/{game_save.save_id}/jobs/{finished_meanwhile.pk}/retry", HTTP_AUTHORIZATION=f"Bearer {key}"
    )
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "conflict" and error["details"] == {"status": "done"}
    assert "only failed, skipped or paused jobs can be retried" in error["message"]


def test_the_jobs_page_notes_a_job_that_finished_meanwhile(client, playtester, game_save, finished_meanwhile):
    client.force_login(playtester)
    url = reverse("memory:job_retry", args=[game_save.save_id, finished_meanwhile.pk])
    response = client.post(url, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200
    assert f"Job {finished_meanwhile.pk} is done; nothing to retry." in html and "ran again" not in html


def test_the_admin_action_retries_only_what_can_be_retried(game_save, django_capture_on_commit_callbacks):
    from django.contrib import admin
    from django.contrib.messages.storage.fallback import FallbackStorage

    from studio.memory.admin_jobs import JobAdmin

    failed, done = make_job(game_save, JobStatus.FAILED), make_job(game_save, JobStatus.DONE)
    request = RequestFactory().post("/admin/")
    request.user = User.objects.create_user("root", is_staff=True, is_superuser=True)
    request.session = {}
    request._messages = FallbackStorage(request)
    with django_capture_on_commit_callbacks(execute=False):
        JobAdmin(Job, admin.site).retry_jobs(request, Job.objects.filter(pk__in=[failed.pk, done.pk]))
    assert [str(m) for m in request._messages] == ["1 job(s) queued again."]
    assert Job.objects.get(pk=failed.pk).status == JobStatus.QUEUED
    assert Job.objects.get(pk=done.pk).status == JobStatus.DONE
