"""Recovering the memory jobs a rewind skipped (issue 19 follow-up).

Until issue 19's fix a rewind left the jobs of the turns it kept on the old timeline
generation, so they ended skipped ("timeline rewound … nothing written") and a retry skipped
them again. `job_retry` now brings a skipped or failed per-turn job of an older generation
onto the live timeline when its turn is still the one it was queued for (the turn's Event is
the one recorded in the job, or, for a job queued before that was recorded, was created
before the job); a job of a dropped turn stays unretryable and says why. The save's Jobs
page and the API retry a whole save's skipped memory jobs at once.

`old_bug_state` rebuilds what the old code left: turns 1-3 appended behind a busy worker,
a rewind to 2, and every one of their jobs skipped on generation 0.
"""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from studio.memory import jobs
from studio.memory.models import Job, JobKind, JobStatus
from studio.saves.checkpoints import CheckpointManager
from studio.world.models import Event, MemoryMode, Save
from studio.saves.services import save_create, turn_append, turn_update_narrative
from tests.memory.jobs.rewind_race import TURNS, drain, engine_api, fact_for, facts_by_turn, narrative_facts_responder

pytestmark = pytest.mark.django_db

OLD_SKIP = "skipped: timeline rewound (generation 0 -> 1); nothing written"
NEW_3 = "Kaël buys a new lantern from the harbour master at dawn."
TURN_KINDS = (JobKind.EMBED_TURN, JobKind.LIVING_TURN)


@pytest.fixture
def skipped_save(living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks):
    llm_server.responder = narrative_facts_responder()
    return old_bug_state(living_universe, fake_vectors, django_capture_on_commit_callbacks)


def old_bug_state(universe, vectors, capture, *, record_event=True):
    with capture(execute=True):
        save = save_create(universe=universe, name="Skipped", memory_mode=MemoryMode.LIVING)
    with capture(execute=False):
        for text in (TURNS[1], TURNS[2], TURNS[3]):
            turn_append(game_save=Save.objects.get(pk=save.pk), player_input="go", narrative=text)
    with capture(execute=True):
        CheckpointManager(vector_memory=vectors).rewind(Save.objects.get(pk=save.pk), 2)
    turn_jobs = Job.objects.filter(game_save=save, kind__in=TURN_KINDS)
    turn_jobs.update(timeline_generation=0, status=JobStatus.SKIPPED, progress=OLD_SKIP)
    if not record_event:  # jobs queued before the Event pk was recorded in their payload
        for job in turn_jobs:
            job.payload = {k: v for k, v in job.payload.items() if k != "event"}
            job.save(update_fields=["payload"])
    return Save.objects.get(pk=save.pk)


def job_of(save, kind, turn):
    return Job.objects.filter(game_save=save, kind=kind, turn_id=turn).latest("id")


# -- one job ------------------------------------------------------------------------------------


@pytest.mark.parametrize("record_event", [True, False], ids=["event-recorded", "timestamps"])
def test_a_retry_brings_a_kept_turns_skipped_jobs_onto_the_live_timeline(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks, record_event
):
    llm_server.responder = narrative_facts_responder()
    save = old_bug_state(living_universe, fake_vectors, django_capture_on_commit_callbacks, record_event=record_event)
    assert fake_vectors.texts(save.save_id) == {} and facts_by_turn(save) == []  # what the old bug left
    for turn in (1, 2):
        for kind in TURN_KINDS:
            with django_capture_on_commit_callbacks(execute=False):
                row = jobs.job_retry(job=job_of(save, kind, turn))
            assert (row.status, row.timeline_generation) == (JobStatus.QUEUED, save.timeline_generation)
    drain(save)
    assert fake_vectors.texts(save.save_id) == {1: [TURNS[1]], 2: [TURNS[2]]}
    assert facts_by_turn(save) == [(1, fact_for(TURNS[1])), (2, fact_for(TURNS[2]))]
    assert {job_of(save, kind, turn).status for kind in TURN_KINDS for turn in (1, 2)} == {JobStatus.DONE}


def test_a_failed_job_of_a_kept_turn_is_recovered_too(skipped_save, django_capture_on_commit_callbacks):
    Job.objects.filter(pk=job_of(skipped_save, JobKind.EMBED_TURN, 1).pk).update(status=JobStatus.FAILED, error="down")
    with django_capture_on_commit_callbacks(execute=True):
        row = jobs.job_retry(job=job_of(skipped_save, JobKind.EMBED_TURN, 1))
    row.refresh_from_db()
    assert row.status == JobStatus.DONE and row.timeline_generation == skipped_save.timeline_generation


def test_a_dropped_turns_job_stays_unretryable_and_says_why(skipped_save, django_capture_on_commit_callbacks):
    for kind in TURN_KINDS:
        job = job_of(skipped_save, kind, 3)
        with pytest.raises(jobs.JobNotRetryable) as refused:
            jobs.job_retry(job=job)
        assert str(refused.value) == (
            f"Job {job.pk} cannot be retried: turn 3 was dropped by a rewind (the save is at turn 2)."
        )
        assert refused.value.reason and refused.value.job.pk == job.pk
        job.refresh_from_db()
        assert (job.status, job.timeline_generation, job.progress) == (JobStatus.SKIPPED, 0, OLD_SKIP)


@pytest.mark.parametrize("record_event", [True, False], ids=["event-recorded", "timestamps"])
def test_a_job_of_a_turn_number_played_again_after_the_rewind_stays_unretryable(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks, record_event
):
    llm_server.responder = narrative_facts_responder()
    save = old_bug_state(living_universe, fake_vectors, django_capture_on_commit_callbacks, record_event=record_event)
    old_3 = job_of(save, JobKind.LIVING_TURN, 3)
    with django_capture_on_commit_callbacks(execute=True):
        turn_append(game_save=save, player_input="go", narrative=NEW_3)  # a new turn 3, with jobs of its own
    new_event = Event.objects.get(game_save=save, turn_id=3)
    assert new_event.created_at > old_3.created_at
    with pytest.raises(jobs.JobNotRetryable, match="turn 3 was dropped by a rewind and played again"):
        jobs.job_retry(job=old_3)
    assert [f for f in facts_by_turn(save) if f[0] == 3] == [(3, fact_for(NEW_3))]
    # The turns that were kept are still recoverable.
    with django_capture_on_commit_callbacks(execute=True):
        jobs.job_retry(job=job_of(save, JobKind.LIVING_TURN, 1))
    assert (1, fact_for(TURNS[1])) in facts_by_turn(save)


def test_new_turn_jobs_record_their_event(game_save, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        event = turn_append(game_save=game_save, player_input="go", narrative="Seven.")
        turn_update_narrative(game_save=game_save, turn_id=event.turn_id, narrative="Seven, edited.")
    payloads = list(Job.objects.filter(game_save=game_save, turn_id=event.turn_id).values_list("payload", flat=True))
    assert payloads and all(p["event"] == event.pk for p in payloads)


# -- a whole save ---------------------------------------------------------------------------------


def test_retrying_a_saves_skipped_jobs_recovers_the_kept_turns_only(skipped_save):
    counts = jobs.jobs_retry_skipped(game_save=skipped_save)
    assert (counts["recovered"], counts["left"]) == (4, 2)
    assert all("turn 3 was dropped" in reason for reason in counts["reasons"])
    drain(skipped_save)
    assert facts_by_turn(skipped_save) == [(1, fact_for(TURNS[1])), (2, fact_for(TURNS[2]))]
    assert {job_of(skipped_save, kind, 3).status for kind in TURN_KINDS} == {JobStatus.SKIPPED}
    assert jobs.jobs_retry_skipped(game_save=skipped_save)["recovered"] == 0  # nothing left to recover


def test_retrying_a_saves_skipped_jobs_leaves_an_edits_superseded_job(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    llm_server.responder = narrative_facts_responder()
    with django_capture_on_commit_callbacks(execute=True):
        save = save_create(universe=living_universe, name="Edited", memory_mode=MemoryMode.LIVING)
    with django_capture_on_commit_callbacks(execute=False):
        turn_append(game_save=save, player_input="go", narrative=TURNS[1])
        turn_update_narrative(game_save=save, turn_id=1, narrative=TURNS[2])  # supersedes the first living job
    superseded = Job.objects.filter(game_save=save, kind=JobKind.LIVING_TURN).earliest("id")
    assert superseded.status == JobStatus.SKIPPED
    counts = jobs.jobs_retry_skipped(game_save=save)
    assert (counts["recovered"], counts["left"]) == (0, 1) and "replaced it" in counts["reasons"][0]
    drain(save)
    assert facts_by_turn(save) == [(1, fact_for(TURNS[2]))]  # extracted once, from the edit


# -- the Jobs page and the API ----------------------------------------------------------------------


def test_the_jobs_page_offers_and_runs_the_recovery(
    client, playtester, skipped_save, django_capture_on_commit_callbacks
):
    client.force_login(playtester)
    url = reverse("memory:jobs", args=[skipped_save.save_id])
    page = client.get(url).content.decode()
    action = reverse("memory:jobs_retry_skipped", args=[skipped_save.save_id])
    assert "Retry skipped memory jobs" in page and f'action="{action}"' in page
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(action, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200 and html.lstrip().startswith('<div id="jobs"')
    assert "Recovered 4 skipped memory jobs; 2 left skipped" in html
    assert facts_by_turn(skipped_save) == [(1, fact_for(TURNS[1])), (2, fact_for(TURNS[2]))]
    response = client.post(action)  # without htmx: a redirect and a message
    assert response.status_code == 302 and response.url == url
    assert "Recovered 0 skipped memory jobs; 2 left skipped" in client.get(url).content.decode()


def test_the_recovery_needs_a_playtester_and_a_csrf_token(client, outsider, universe, playtester, skipped_save):
    action = reverse("memory:jobs_retry_skipped", args=[skipped_save.save_id])
    client.force_login(outsider)
    assert client.post(action).status_code == 404  # cannot even see the save
    universe.members.add(outsider)  # a member without a role may look, not act
    assert (
        "Retry skipped memory jobs"
        not in client.get(reverse("memory:jobs", args=[skipped_save.save_id])).content.decode()
    )
    assert client.post(action).status_code == 403
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(playtester)
    assert strict.post(action).status_code == 403
    assert Job.objects.filter(game_save=skipped_save, status=JobStatus.SKIPPED).count() == 6  # nothing retried


def test_the_api_recovers_one_job_or_a_whole_save(skipped_save, playtester, django_capture_on_commit_callbacks):
    api = engine_api(playtester)
    base = f"/api/v1/saves/{skipped_save.save_id}/jobs"
    dropped = job_of(skipped_save, JobKind.EMBED_TURN, 3)
    response = api.post(f"{base}/{dropped.pk}/retry", {})
    assert response.status_code == 409
    body = response.json()
    assert body["error"]["code"] == "conflict" and "turn 3 was dropped" in body["error"]["message"], body
    kept = job_of(skipped_save, JobKind.EMBED_TURN, 1)
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(f"{base}/{kept.pk}/retry", {})
    assert response.status_code == 200 and response.json()["id"] == kept.pk
    assert Job.objects.get(pk=kept.pk).status == JobStatus.DONE
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(f"{base}/retry-skipped", {})
    assert response.status_code == 200, response.content
    assert {k: response.json()[k] for k in ("recovered", "left")} == {"recovered": 3, "left": 2}
    assert facts_by_turn(skipped_save) == [(1, fact_for(TURNS[1])), (2, fact_for(TURNS[2]))]
