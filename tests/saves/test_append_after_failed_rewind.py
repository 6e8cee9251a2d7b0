"""A turn appended after a rewind whose vector delete failed never revives the old timeline."""

from __future__ import annotations

import pytest

from studio.memory.models import Job, JobKind, JobStatus
from studio.saves.checkpoints import CheckpointManager
from studio.world.models import Event
from studio.saves.services import PendingVectorCleanupError, turn_append


@pytest.fixture
def vector(fake_vectors):
    return fake_vectors


@pytest.fixture
def rewound(game_save, vector, django_capture_on_commit_callbacks):
    for turn in (1, 2, 3):
        vector.embed_chunk(game_save.save_id, turn, f"Old timeline turn {turn}.")
    vector.fail_rollback = 1
    with django_capture_on_commit_callbacks(execute=True):
        CheckpointManager(vector_memory=vector).rewind(game_save, 1)
    game_save.refresh_from_db()
    assert Job.objects.get(kind=JobKind.VECTOR_ROLLBACK, game_save=game_save).status == JobStatus.FAILED
    return game_save


def test_append_finishes_the_pending_delete_first(rewound, vector):
    event = turn_append(game_save=rewound, player_input="go", narrative="New timeline turn 2.")
    assert event.turn_id == 2
    # The old timeline's chunks after turn 1 are gone before turn 2 exists again.
    assert sorted(c["turn_id"] for c in vector.chunks if c["save_id"] == rewound.save_id and "Old" in c["text"]) == [1]
    assert Job.objects.get(kind=JobKind.VECTOR_ROLLBACK, game_save=rewound).status == JobStatus.DONE


def test_append_is_refused_when_the_delete_still_fails(rewound, vector):
    vector.fail_rollback = 1
    with pytest.raises(PendingVectorCleanupError, match="old timeline"):
        turn_append(game_save=rewound, player_input="go", narrative="New timeline turn 2.")
    rewound.refresh_from_db()
    assert rewound.current_turn == 1
    assert not Event.objects.filter(game_save=rewound, turn_id=2).exists()
    # Once the store answers again the append goes through.
    assert turn_append(game_save=rewound, player_input="go", narrative="Now.").turn_id == 2


def test_console_shows_the_refusal_and_keeps_the_text(client, playtester, rewound, vector):
    vector.fail_rollback = 1
    client.force_login(playtester)
    response = client.post(f"/saves/{rewound.save_id}/turns/", {"player_input": "go", "narrative": "Typed text stays."})
    body = response.content.decode()
    assert response.status_code == 200
    assert "old timeline back into memory" in body and "Typed text stays." in body
    assert not Event.objects.filter(game_save=rewound, turn_id=2).exists()


def test_retrying_the_failed_delete_from_the_jobs_page_runs_it(client, playtester, rewound, vector):
    job = Job.objects.get(kind=JobKind.VECTOR_ROLLBACK, game_save=rewound)
    client.force_login(playtester)
    response = client.post(f"/memory/{rewound.save_id}/jobs/{job.pk}/retry/")
    assert response.status_code in (200, 302)
    job.refresh_from_db()
    assert job.status == JobStatus.DONE
    assert sorted(c["turn_id"] for c in vector.chunks if c["save_id"] == rewound.save_id) == [1]


def test_retrying_a_failed_fork_copy_completes_it(game_save, vector, django_capture_on_commit_callbacks):
    from studio.memory.jobs import job_retry

    for turn in (1, 2, 3):
        vector.embed_chunk(game_save.save_id, turn, f"Turn {turn}.")
    vector.fail_copy = 1
    with django_capture_on_commit_callbacks(execute=True):
        fork = CheckpointManager(vector_memory=vector).fork(game_save, 2, name="Fork")
    job = Job.objects.get(kind=JobKind.FORK_VECTORS, game_save=fork)
    assert job.status == JobStatus.FAILED
    assert job_retry(job=job).status == JobStatus.DONE
    assert sorted(c["turn_id"] for c in vector.chunks if c["save_id"] == fork.save_id) == [1, 2]
