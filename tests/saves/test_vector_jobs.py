"""The vector jobs of rewind and fork go through the job ledger like every other kind.

A failed vector delete (or copy) is a failed attempt of its Job: back to the queue with the
ledger's backoff, a runner woken for when it is due, run by the save's runner then, FAILED
once out of attempts, and retryable from the Jobs page and the API, where it is listed.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from studio.memory import jobs
from studio.memory.models import Job, JobKind, JobStatus
from studio.saves.checkpoints import CheckpointManager
from studio.world.models import Event

pytestmark = pytest.mark.django_db


@pytest.fixture
def vector(fake_vectors):
    """The fake store, also the one a background runner (no manager at hand) uses."""
    return fake_vectors


@pytest.fixture
def woken(monkeypatch):
    """Record the runner wake-ups the ledger asks for instead of starting runners."""
    calls: list[tuple[int, float]] = []
    monkeypatch.setattr(
        "studio.memory.jobs.dispatch.send", lambda job_id, countdown=0: calls.append((job_id, countdown))
    )
    return calls


@pytest.fixture
def retries(settings):
    settings.AXIOM_JOB_MAX_ATTEMPTS = 3
    settings.AXIOM_JOB_RETRY_BACKOFF = 60
    return settings


def chunk_turns(vector, save_id):
    return sorted(c["turn_id"] for c in vector.chunks if c["save_id"] == save_id)


def make_due(job):
    """Let the backoff pass: the retry time moves to the past."""
    job.refresh_from_db()
    payload = dict(job.payload)
    payload["not_before"] = (timezone.now() - timedelta(seconds=1)).isoformat()
    Job.objects.filter(pk=job.pk).update(payload=payload)


@pytest.mark.django_db(transaction=True)
def test_a_failed_delete_is_retried_with_backoff_by_the_saves_runner(game_save, vector, woken, retries):
    for turn in (1, 2, 3):
        vector.embed_chunk(game_save.save_id, turn, f"Turn {turn}.")
    vector.fail_rollback = 1
    before = timezone.now()
    # No outer transaction: the delete runs right after the rewind's commit, in this call.
    result = CheckpointManager(vector_memory=vector).rewind(game_save, 1)
    job = Job.objects.get(kind=JobKind.VECTOR_ROLLBACK, game_save=game_save)
    # The rewind reports the failure, and the ledger queued a retry after the backoff.
    assert result.vector_pending and "unreachable" in result.vector_error
    assert job.status == JobStatus.QUEUED and job.attempts == 1
    assert job.progress == "retrying in 60s (attempt 1 failed)" and "unreachable" in job.error
    due = timezone.datetime.fromisoformat(job.payload["not_before"])
    assert before + timedelta(seconds=59) < due < timezone.now() + timedelta(seconds=61)
    assert [(job_id, round(countdown)) for job_id, countdown in woken] == [(job.pk, 60)]
    assert chunk_turns(vector, game_save.save_id) == [1, 2, 3]

    # Not due yet: the save's runner leaves it alone.
    jobs.run_job(job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED and vector.calls == [("rollback", game_save.save_id, 1)]

    make_due(job)
    jobs.run_job(job.pk)  # what the wake-up does once the backoff has passed
    job.refresh_from_db()
    assert job.status == JobStatus.DONE and job.attempts == 2 and job.error == ""
    assert job.result["deleted"] == 2
    assert chunk_turns(vector, game_save.save_id) == [1]


def test_a_delete_out_of_attempts_fails_and_a_retry_runs_it_at_once(
    game_save, vector, woken, retries, django_capture_on_commit_callbacks
):
    retries.AXIOM_JOB_MAX_ATTEMPTS = 2
    for turn in (1, 2, 3):
        vector.embed_chunk(game_save.save_id, turn, f"Turn {turn}.")
    vector.fail_rollback = 2
    with django_capture_on_commit_callbacks(execute=True):
        CheckpointManager(vector_memory=vector).rewind(game_save, 1)
    job = Job.objects.get(kind=JobKind.VECTOR_ROLLBACK, game_save=game_save)
    make_due(job)
    jobs.run_job(job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.attempts == 2
    assert "Traceback" in job.error and "vector store unreachable" in job.error

    retried = jobs.job_retry(job=job)  # the Jobs page and the API call this
    assert retried.status == JobStatus.DONE and retried.attempts == 1
    assert chunk_turns(vector, game_save.save_id) == [1]


def test_a_failed_fork_copy_is_retried_with_backoff_without_duplicates(
    game_save, vector, woken, retries, django_capture_on_commit_callbacks
):
    for turn in (1, 2, 3):
        vector.embed_chunk(game_save.save_id, turn, f"Turn {turn}.")
    vector.fail_copy = 1  # fails half-way: one chunk copied already
    with django_capture_on_commit_callbacks(execute=True):
        fork = CheckpointManager(vector_memory=vector).fork(game_save, 2, name="Fork")
    job = Job.objects.get(kind=JobKind.FORK_VECTORS, game_save=fork)
    assert job.status == JobStatus.QUEUED and job.attempts == 1 and "mid-copy" in job.error
    assert [job_id for job_id, _countdown in woken] == [job.pk]
    make_due(job)
    jobs.run_job(job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.DONE and job.attempts == 2 and job.result["copied"] == 2
    # The half-copied chunk of the first attempt was cleared first.
    assert chunk_turns(vector, fork.save_id) == [1, 2]


def test_an_append_runs_a_deferred_delete_first_without_waiting_for_the_backoff(
    game_save, vector, woken, retries, django_capture_on_commit_callbacks
):
    from studio.saves.services import turn_append

    for turn in (1, 2, 3):
        vector.embed_chunk(game_save.save_id, turn, f"Old turn {turn}.")
    vector.fail_rollback = 1
    with django_capture_on_commit_callbacks(execute=True):
        CheckpointManager(vector_memory=vector).rewind(game_save, 1)
    job = Job.objects.get(kind=JobKind.VECTOR_ROLLBACK, game_save=game_save)
    assert job.status == JobStatus.QUEUED  # waiting 60 s for its retry
    with django_capture_on_commit_callbacks(execute=False):
        event = turn_append(game_save=game_save, player_input="go", narrative="New turn 2.")
    job.refresh_from_db()
    assert event.turn_id == 2 and job.status == JobStatus.DONE and job.attempts == 2
    assert chunk_turns(vector, game_save.save_id) == [1]


def test_the_jobs_page_retry_of_a_delete_shows_its_outcome(
    client, playtester, game_save, vector, woken, django_capture_on_commit_callbacks
):
    vector.fail_rollback = 1
    with django_capture_on_commit_callbacks(execute=True):
        CheckpointManager(vector_memory=vector).rewind(game_save, 1)
    job = Job.objects.get(kind=JobKind.VECTOR_ROLLBACK, game_save=game_save)
    client.force_login(playtester)
    page = client.get(f"/memory/{game_save.save_id}/jobs/").content.decode()
    assert f'id="job-{job.pk}"' in page and "Delete rewound vector chunks" in page
    response = client.post(f"/memory/{game_save.save_id}/jobs/{job.pk}/retry/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert f"Job {job.pk} ran again: done." in response.content.decode()
    assert not Event.objects.filter(game_save=game_save, turn_id__gt=1).exists()
