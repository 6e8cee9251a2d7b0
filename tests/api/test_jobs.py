"""Job status through the API: a save's jobs, one job, and retrying a failed one."""

from __future__ import annotations

import pytest

from studio.memory.models import Job, JobKind, JobStatus

from tests.support.api_errors import error_code

pytestmark = pytest.mark.django_db


@pytest.fixture
def jobs(game_save, other_universe_save):
    done = Job.objects.create(kind=JobKind.EMBED_TURN, game_save=game_save, turn_id=1, status=JobStatus.DONE)
    failed = Job.objects.create(
        kind=JobKind.LIVING_TURN, game_save=game_save, turn_id=2, status=JobStatus.FAILED, error="LLM down", attempts=3
    )
    hidden = Job.objects.create(
        kind=JobKind.EMBED_TURN, game_save=other_universe_save, turn_id=1, status=JobStatus.FAILED
    )
    return {"done": done, "failed": failed, "hidden": hidden}


def test_jobs_of_a_save_newest_first_with_filters(api, game_save, jobs):
    url = f"/api/v1/saves/{game_save.save_id}/jobs"
    body = api.get(url).json()
    assert [j["id"] for j in body["items"]] == [jobs["failed"].pk, jobs["done"].pk]
    assert body["items"][0]["error"] == "LLM down" and body["items"][0]["save_id"] == game_save.save_id
    assert [j["id"] for j in api.get(url, {"status": "failed"}).json()["items"]] == [jobs["failed"].pk]
    assert [j["id"] for j in api.get(url, {"turn_id": 1}).json()["items"]] == [jobs["done"].pk]
    assert [j["id"] for j in api.get(url, {"kind": "embed_turn"}).json()["items"]] == [jobs["done"].pk]
    assert api.get(url, {"status": "exploded"}).status_code == 400


def test_one_job(api, game_save, jobs):
    body = api.get(f"/api/v1/saves/{game_save.save_id}/jobs/{jobs['done'].pk}").json()
    assert body["id"] == jobs["done"].pk and body["status"] == "done" and body["kind"] == "embed_turn"


def test_a_job_of_another_save_is_404(api, game_save, jobs):
    response = api.get(f"/api/v1/saves/{game_save.save_id}/jobs/{jobs['hidden'].pk}")
    assert response.status_code == 404
    assert error_code(response) == "not_found"


def test_retry_queues_a_failed_job(api, game_save, jobs):
    response = api.post(f"/api/v1/saves/{game_save.save_id}/jobs/{jobs['failed'].pk}/retry")
    assert response.status_code == 200
    assert response.json()["status"] == "queued"
    jobs["failed"].refresh_from_db()
    assert jobs["failed"].status == JobStatus.QUEUED and jobs["failed"].error == ""


def test_retry_of_a_done_job_is_409(api, game_save, jobs):
    response = api.post(f"/api/v1/saves/{game_save.save_id}/jobs/{jobs['done'].pk}/retry")
    assert response.status_code == 409
    jobs["done"].refresh_from_db()
    assert jobs["done"].status == JobStatus.DONE


def test_retry_needs_the_playtester_role(make_api, member_without_role, game_save, jobs):
    response = make_api(member_without_role).post(f"/api/v1/saves/{game_save.save_id}/jobs/{jobs['failed'].pk}/retry")
    assert response.status_code == 403
    jobs["failed"].refresh_from_db()
    assert jobs["failed"].status == JobStatus.FAILED


def test_a_rewinds_vector_job_is_listed_and_retried_at_once(
    api, game_save, settings, fake_vectors, django_capture_on_commit_callbacks
):
    from studio.saves.checkpoints import CheckpointManager

    settings.AXIOM_JOB_MAX_ATTEMPTS = 1  # the first failure is final: the job shows FAILED
    vector = fake_vectors
    for turn in (1, 2, 3):
        vector.embed_chunk(game_save.save_id, turn, f"Turn {turn}.")
    vector.fail_rollback = 1
    with django_capture_on_commit_callbacks(execute=True):
        CheckpointManager().rewind(game_save, 1)
    url = f"/api/v1/saves/{game_save.save_id}/jobs"
    (listed,) = api.get(url, {"kind": "vector_rollback"}).json()["items"]
    assert listed["status"] == "failed" and "unreachable" in listed["error"]
    response = api.post(f"{url}/{listed['id']}/retry")
    # An immediate kind runs in the retry request itself: the answer carries its outcome.
    assert response.status_code == 200 and response.json()["status"] == "done"
    assert vector.turns(game_save.save_id) == [1]
