"""A rewind keeps the memory of the turns it keeps (issue 19, item 1).

The rule (`studio.memory.jobs.timeline`): work for a turn that survives a rewind is kept or
redone; work for a dropped turn is never written, even once the turn number is reused.
Turns are queued with their on-commit dispatch dropped where a test needs jobs waiting, as
they do behind a busy worker; a rewind "from elsewhere" runs in the model server's thread
while a job waits for the model.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from studio.memory import jobs
from studio.memory.models import Fact, Job, JobKind, JobStatus, LoreActivation, Observation
from studio.saves.checkpoints import CheckpointManager
from studio.saves.models import NarratorSnapshot
from studio.world.models import Event, MemoryMode, Save
from studio.saves.services import save_create, turn_append, turn_update_narrative
from tests.llm_server import operation_of, scripted_pipeline_responder, user_prompt
from tests.memory.jobs.rewind_race import (
    TURNS,
    assert_kept_turns_remembered,
    drain,
    engine_api,
    fact_for,
    facts_by_turn,
    live_pool,
    narrative_facts_responder,
    play_then_rewind,
    queue_turns,
    wait_idle,
)

pytestmark = pytest.mark.django_db

NEW_3 = "Kaël buys a new lantern from the harbour master at dawn."


def rewind(save, turn, vectors, capture=None, **kwargs):
    fresh = Save.objects.get(pk=save.pk)
    if capture is None:
        return CheckpointManager(vector_memory=vectors).rewind(fresh, turn, **kwargs)
    with capture(execute=True):
        return CheckpointManager(vector_memory=vectors).rewind(fresh, turn, **kwargs)


def statuses(save, kind):
    return {
        turn: status for turn, status in Job.objects.filter(game_save=save, kind=kind).values_list("turn_id", "status")
    }


def extractions_of(server, text):
    return [r for r in server.requests if operation_of(r) == "extract" and text in user_prompt(r)]


def from_another_thread(action):
    try:
        action()
    finally:
        connections.close_all()  # the model server thread's connection


# -- the rule, on queued jobs --------------------------------------------------------------------


def test_a_rewind_keeps_the_queued_work_of_the_turns_it_keeps(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    llm_server.responder = narrative_facts_responder()
    with django_capture_on_commit_callbacks(execute=True):
        save = save_create(universe=living_universe, name="Race", memory_mode=MemoryMode.LIVING)
    queue_turns(django_capture_on_commit_callbacks, save, [TURNS[1], TURNS[2], TURNS[3]])
    result = rewind(save, 2, fake_vectors, django_capture_on_commit_callbacks, expected_current_turn=3)
    assert result.changed
    drain(save)
    assert fake_vectors.texts(save.save_id) == {1: [TURNS[1]], 2: [TURNS[2]]}
    assert facts_by_turn(save) == [(1, fact_for(TURNS[1])), (2, fact_for(TURNS[2]))]
    assert statuses(save, JobKind.EMBED_TURN) == {1: JobStatus.DONE, 2: JobStatus.DONE, 3: JobStatus.SKIPPED}
    assert statuses(save, JobKind.LIVING_TURN) == {1: JobStatus.DONE, 2: JobStatus.DONE, 3: JobStatus.SKIPPED}
    dropped = Job.objects.get(game_save=save, kind=JobKind.EMBED_TURN, turn_id=3)
    assert "timeline rewound" in dropped.progress and "dropped" in dropped.progress
    assert extractions_of(llm_server, TURNS[3]) == []  # the dropped turn cost no model call


def test_a_classic_save_keeps_the_embeddings_of_kept_turns(
    game_save, eager_jobs, fake_vectors, django_capture_on_commit_callbacks
):
    queue_turns(django_capture_on_commit_callbacks, game_save, ["Four.", "Five.", "Six."])
    rewind(game_save, 5, fake_vectors, django_capture_on_commit_callbacks)
    drain(game_save)
    assert fake_vectors.texts(game_save.save_id) == {4: ["Four."], 5: ["Five."]}
    assert statuses(game_save, JobKind.EMBED_TURN) == {4: JobStatus.DONE, 5: JobStatus.DONE, 6: JobStatus.SKIPPED}


def test_what_a_rewind_does_to_each_job(game_save, fake_vectors, django_capture_on_commit_callbacks):
    """Kept turns' jobs move to the new generation whatever their state (done ones stay as they
    were); dropped turns' jobs stay on the old timeline (to be skipped when reached); a pending
    refresh is moved to the target; a job an earlier rewind dropped stays dead."""
    Save.objects.filter(pk=game_save.pk).update(timeline_generation=1)
    game_save.refresh_from_db()
    common = {"universe_id": game_save.universe_id, "game_save": game_save}

    def job(kind, turn, status, generation=1):
        return Job.objects.create(kind=kind, turn_id=turn, status=status, timeline_generation=generation, **common)

    rows = {
        "kept queued": job(JobKind.EMBED_TURN, 1, JobStatus.QUEUED),
        "kept failed": job(JobKind.LIVING_TURN, 2, JobStatus.FAILED),
        "kept skipped": job(JobKind.LIVING_TURN, 2, JobStatus.SKIPPED),
        "kept done": job(JobKind.LIVING_TURN, 1, JobStatus.DONE),
        "dropped queued": job(JobKind.EMBED_TURN, 3, JobStatus.QUEUED),
        "dropped paused": job(JobKind.LIVING_TURN, 3, JobStatus.PAUSED),
        "dropped failed": job(JobKind.LIVING_TURN, 3, JobStatus.FAILED),
        "refresh after": job(JobKind.REFRESH_MODELS, 3, JobStatus.QUEUED),
        "refresh skipped": job(JobKind.REFRESH_MODELS, 3, JobStatus.SKIPPED),
        "dropped earlier": job(JobKind.EMBED_TURN, 1, JobStatus.FAILED, generation=0),
        "lore sync": job(JobKind.SYNC_LORE, None, JobStatus.QUEUED),
    }
    rewind(game_save, 2, fake_vectors, django_capture_on_commit_callbacks)
    after = {name: Job.objects.get(pk=row.pk) for name, row in rows.items()}
    got = {name: (row.turn_id, row.timeline_generation, row.status) for name, row in after.items()}
    assert got == {
        "kept queued": (1, 2, JobStatus.QUEUED),
        "kept failed": (2, 2, JobStatus.FAILED),
        "kept skipped": (2, 2, JobStatus.SKIPPED),
        "kept done": (1, 1, JobStatus.DONE),
        "dropped queued": (3, 1, JobStatus.QUEUED),
        "dropped paused": (3, 1, JobStatus.PAUSED),
        "dropped failed": (3, 1, JobStatus.FAILED),
        "refresh after": (2, 2, JobStatus.QUEUED),
        "refresh skipped": (3, 1, JobStatus.SKIPPED),
        "dropped earlier": (1, 0, JobStatus.FAILED),
        "lore sync": (None, 1, JobStatus.QUEUED),
    }
    jobs.run_job(rows["dropped queued"].pk)  # the save's runner reaches it: nothing to do
    dropped = Job.objects.get(pk=rows["dropped queued"].pk)
    assert dropped.status == JobStatus.SKIPPED and "turn 3 was dropped" in dropped.progress
    assert fake_vectors.named("update_turn_narrative") == [
        ("update_turn_narrative", game_save.save_id, 1, "Turn 1 text.")  # the kept turn's job ran
    ]


def test_a_running_memory_job_is_flagged_to_redo_only_when_the_rewind_rolled_back_memory(game_save):
    common = {"universe_id": game_save.universe_id, "game_save": game_save, "status": JobStatus.RUNNING}
    living = Job.objects.create(kind=JobKind.LIVING_TURN, turn_id=1, payload={"worker": "w"}, **common)
    embed = Job.objects.create(kind=JobKind.EMBED_TURN, turn_id=1, payload={"worker": "w"}, **common)
    jobs.job_timeline_rewind(game_save=game_save, target_turn=2, generation=1, memory_rewound=False)
    living.refresh_from_db()
    assert living.timeline_generation == 1 and "redo" not in living.payload
    game_save.timeline_generation = 1
    jobs.job_timeline_rewind(game_save=game_save, target_turn=2, generation=2, memory_rewound=True)
    living.refresh_from_db()
    embed.refresh_from_db()
    assert living.timeline_generation == 2 and "rewind to turn 2" in living.payload["redo"]
    assert living.payload["worker"] == "w"  # still its runner's
    assert embed.timeline_generation == 2 and "redo" not in embed.payload  # a narrative never changes under it


def test_a_failed_job_of_a_dropped_turn_writes_nothing_after_the_turn_number_is_reused(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    llm_server.responder = narrative_facts_responder()
    with django_capture_on_commit_callbacks(execute=True):
        save = save_create(universe=living_universe, name="Reused", memory_mode=MemoryMode.LIVING)
    queue_turns(django_capture_on_commit_callbacks, save, [TURNS[1], TURNS[2], TURNS[3]])
    old_3 = Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN, turn_id=3)
    Job.objects.filter(pk=old_3.pk).update(status=JobStatus.FAILED, error="model down")
    rewind(save, 2, fake_vectors, django_capture_on_commit_callbacks)
    queue_turns(django_capture_on_commit_callbacks, save, [NEW_3, "Kaël sleeps."])
    rewind(save, 3, fake_vectors, django_capture_on_commit_callbacks)  # keeps the new turn 3
    with django_capture_on_commit_callbacks(execute=True):
        with pytest.raises(jobs.JobNotRetryable, match="turn 3 was dropped by a rewind and played again"):
            jobs.job_retry(job=old_3)  # its turn is gone: refused, nothing changed (issue 19's recovery)
    drain(save)
    old_3.refresh_from_db()
    assert old_3.status == JobStatus.FAILED and old_3.timeline_generation == 0
    assert extractions_of(llm_server, TURNS[3]) == []
    assert facts_by_turn(save) == [(1, fact_for(TURNS[1])), (2, fact_for(TURNS[2])), (3, fact_for(NEW_3))]
    assert fake_vectors.texts(save.save_id) == {1: [TURNS[1]], 2: [TURNS[2]], 3: [NEW_3]}


def test_a_refresh_of_the_models_is_moved_to_the_rewind_target(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        save = save_create(universe=living_universe, name="Refresh", memory_mode=MemoryMode.LIVING)
    queue_turns(django_capture_on_commit_callbacks, save, ["One.", "Two.", "Three."])
    with django_capture_on_commit_callbacks(execute=False):
        refresh = jobs.enqueue_refresh_models(game_save=Save.objects.get(pk=save.pk))
    rewind(save, 1, fake_vectors, django_capture_on_commit_callbacks)
    refresh.refresh_from_db()
    save.refresh_from_db()
    assert (refresh.turn_id, refresh.timeline_generation, refresh.status) == (
        1,
        save.timeline_generation,
        JobStatus.QUEUED,
    )
    drain(save)
    refresh.refresh_from_db()
    assert refresh.status == JobStatus.DONE, refresh.progress


# -- the rule, on running jobs (a rewind from another thread while the job waits) --------------


@pytest.mark.django_db(transaction=True)
def test_a_running_job_of_a_kept_turn_writes_when_the_rewind_changed_no_memory(
    living_universe, eager_jobs, fake_vectors, llm_server, monkeypatch
):
    save = save_create(universe=living_universe, name="Running", memory_mode=MemoryMode.LIVING)
    good = narrative_facts_responder()
    fired = threading.Event()

    def responder(request):
        if operation_of(request) == "extract" and TURNS[1] in user_prompt(request) and not fired.is_set():
            fired.set()  # turn 1's living job waits for the model while a rewind to 1 lands
            from_another_thread(lambda: rewind(save, 1, fake_vectors))
        return good(request)

    llm_server.responder = responder
    monkeypatch.setattr("studio.memory.jobs.dispatch.send", lambda job_id, countdown=0: None)  # the turns queue up
    for text in (TURNS[1], TURNS[2]):
        turn_append(game_save=Save.objects.get(pk=save.pk), player_input="", narrative=text)
    drain(save)
    assert Save.objects.get(pk=save.pk).current_turn == 1
    living = Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN, turn_id=1)
    assert living.status == JobStatus.DONE and living.attempts == 1, living.progress
    assert len(extractions_of(llm_server, TURNS[1])) == 1  # kept, not redone
    assert facts_by_turn(save) == [(1, fact_for(TURNS[1]))]
    assert statuses(save, JobKind.LIVING_TURN)[2] == JobStatus.SKIPPED


@pytest.mark.django_db(transaction=True)
def test_a_running_job_of_a_kept_turn_is_redone_when_the_rewind_rolled_back_memory_it_read(
    living_universe, eager_jobs, fake_vectors, llm_server
):
    calls = iter(range(1, 100))
    good = scripted_pipeline_responder(
        actions=lambda request: [
            {
                "action": "CREATE",
                "subject": "Kaël",
                "statement": f"Kaël keeps promise {next(calls)}.",
                "source_fact_ids": [1],
            }
        ]
    )
    llm_server.responder = good
    save = save_create(universe=living_universe, name="Redo", memory_mode=MemoryMode.LIVING)
    for text in ("One.", "Two.", "Three."):
        turn_append(game_save=Save.objects.get(pk=save.pk), player_input="", narrative=text)
    assert Observation.objects.filter(game_save=save, created_turn_id=3).exists()  # turn 3 made a belief
    fired = threading.Event()

    def responder(request):
        if operation_of(request) == "consolidate" and not fired.is_set():
            fired.set()
            # the re-extraction of turn 1 has read the beliefs turn 3 changed; a rewind to 2 rolls them back
            from_another_thread(lambda: rewind(save, 2, fake_vectors))
        return good(request)

    llm_server.responder = responder
    turn_update_narrative(game_save=Save.objects.get(pk=save.pk), turn_id=1, narrative="One, edited.")
    assert fired.is_set()
    reextract = Job.objects.filter(game_save=save, kind=JobKind.LIVING_TURN, turn_id=1).latest("id")
    assert reextract.payload.get("reextract") and reextract.status == JobStatus.DONE, reextract.progress
    assert reextract.attempts == 1 and "redo" not in reextract.payload
    assert len(extractions_of(llm_server, "One, edited.")) == 2  # run again on the rewound memory
    assert Fact.objects.filter(game_save=save, turn_id=1).count() == 2  # written once
    assert not Observation.objects.filter(game_save=save, created_turn_id__gt=2).exists()


def test_a_rewind_between_the_claim_and_the_start_keeps_the_job(
    game_save, eager_jobs, fake_vectors, django_capture_on_commit_callbacks
):
    queue_turns(django_capture_on_commit_callbacks, game_save, ["Four.", "Five."])
    job = Job.objects.get(game_save=game_save, kind=JobKind.EMBED_TURN, turn_id=4)
    worker = jobs.worker_identity()
    [claimed] = jobs.claim_batch(job, worker, limit=1)  # the runner holds turn 4's job ...
    rewind(game_save, 4, fake_vectors, django_capture_on_commit_callbacks)  # ... when a rewind keeps it
    assert claimed.timeline_generation == 0  # the runner's copy predates the rewind
    from studio.memory.jobs.runner import _execute

    outcome = _execute(claimed, worker)
    assert outcome.status == JobStatus.DONE, outcome.error
    assert fake_vectors.texts(game_save.save_id)[4] == ["Four."]


# -- what the append transaction writes -----------------------------------------------------------


def test_lore_activations_and_narrator_snapshots_of_kept_turns_are_untouched(
    game_save, author, eager_jobs, fake_vectors, django_capture_on_commit_callbacks
):
    from studio.universes import services
    from studio.world.models import LoreEntry

    services.lore_entry_update(
        entry=LoreEntry.objects.get(entry_id="kael"), user=author, keys=["Kaël"], activation={"probability": 50}
    )

    def play(inputs):
        with django_capture_on_commit_callbacks(execute=False):
            for text in inputs:
                turn_append(game_save=game_save, player_input=text, narrative=f"The narrator answers {text}")

    play(["Kaël waits.", "Kaël runs.", "Kaël hides."])
    for turn in (4, 5, 6):
        NarratorSnapshot.objects.create(game_save=game_save, turn_id=turn, player_input="go", proposed=f"p{turn}")

    def rows():
        return {
            "lore": list(
                LoreActivation.objects.filter(game_save=game_save)
                .order_by("turn_id")
                .values_list("pk", "turn_id", "seed", "activated", "state")
            ),
            "snapshots": list(
                NarratorSnapshot.objects.filter(game_save=game_save)
                .order_by("turn_id")
                .values_list("pk", "turn_id", "proposed")
            ),
        }

    before = rows()
    assert [r[1] for r in before["lore"]] == [4, 5, 6] and len({r[2] for r in before["lore"]}) == 3
    rewind(game_save, 5, fake_vectors, django_capture_on_commit_callbacks)
    assert rows() == {"lore": before["lore"][:2], "snapshots": before["snapshots"][:2]}
    play(["Kaël fights."])
    new_6 = LoreActivation.objects.get(game_save=game_save, turn_id=6)
    assert new_6.pk != before["lore"][2][0] and new_6.seed != before["lore"][2][2]  # the new timeline's roll
    assert rows()["lore"][:2] == before["lore"][:2]
    assert Event.objects.get(game_save=game_save, turn_id=6).player_input == "Kaël fights."


# -- the report's scenario through the API, on the in-process pool -------------------------------


@pytest.mark.django_db(transaction=True)
def test_append_then_rewind_at_once_keeps_the_kept_turns_memory_on_the_inprocess_pool(
    living_universe, settings, llm_server, monkeypatch, playtester
):
    vectors, hold = live_pool(settings, monkeypatch, llm_server)
    save = save_create(universe=living_universe, name="Race", memory_mode=MemoryMode.LIVING)
    api = engine_api(playtester)
    try:
        play_then_rewind(api, save, llm_server, hold)
        wait_idle(save)
    finally:
        hold.set()
        jobs.shutdown_inprocess_runner()
    assert_kept_turns_remembered(api, save, vectors)
