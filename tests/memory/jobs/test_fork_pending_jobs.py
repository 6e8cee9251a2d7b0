"""A fork keeps the memory work its source had not finished (issue 19 follow-up).

Forking at N copies memory as the source holds it. When the source's embedding or living
job of a turn <= N has not ended done (queued behind a busy worker, running, failed,
skipped), the fork does that work itself: the fork's vector copy embeds those turns after
copying, and the fork queues its own living jobs for them in turn order. The fork then ends
with the memory a source that had finished would have given it (compared with a fork made
after the source finished), and the source is unaffected.
"""

from __future__ import annotations

import pytest

from studio.memory import jobs
from studio.memory.models import Job, JobKind, JobStatus, Observation
from studio.saves.checkpoints import CheckpointManager
from studio.world.models import MemoryMode, Save
from studio.saves.services import save_create, turn_append, turn_update_narrative
from tests.memory.jobs.rewind_race import (
    TURNS,
    drain,
    engine_api,
    fact_for,
    facts_by_turn,
    live_pool,
    narrative_facts_responder,
    play_while_held,
    queue_turns,
    wait_idle,
)

pytestmark = pytest.mark.django_db


def beliefs(save):
    return sorted(
        Observation.objects.filter(game_save=save).values_list(
            "subject", "statement", "created_turn_id", "updated_turn_id", "deleted_turn_id", "proof_count", "stale"
        )
    )


def test_a_fork_does_the_work_its_source_had_queued_for_the_turns_it_copies(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    llm_server.responder = narrative_facts_responder()
    with django_capture_on_commit_callbacks(execute=True):
        source = save_create(universe=living_universe, name="Source", memory_mode=MemoryMode.LIVING)
    queue_turns(django_capture_on_commit_callbacks, source, [TURNS[1], TURNS[2], TURNS[3]])
    with django_capture_on_commit_callbacks(execute=True):
        fork = CheckpointManager(vector_memory=fake_vectors).fork(Save.objects.get(pk=source.pk), 2)
    drain(fork)
    assert fake_vectors.texts(fork.save_id) == {1: [TURNS[1]], 2: [TURNS[2]]}
    assert facts_by_turn(fork) == [(1, fact_for(TURNS[1])), (2, fact_for(TURNS[2]))]
    copy = Job.objects.get(game_save=fork, kind=JobKind.FORK_VECTORS)
    assert copy.status == JobStatus.DONE and copy.result["embedded_turns"] == [1, 2]
    living = list(Job.objects.filter(game_save=fork, kind=JobKind.LIVING_TURN).order_by("started_at", "id"))
    assert [(j.turn_id, j.status) for j in living] == [(1, JobStatus.DONE), (2, JobStatus.DONE)]  # in turn order
    # The source's own jobs were not touched by the fork and still do their work.
    assert Job.objects.filter(game_save=source, status=JobStatus.QUEUED).count() == 6
    drain(source)
    assert fake_vectors.texts(source.save_id) == {1: [TURNS[1]], 2: [TURNS[2]], 3: [TURNS[3]]}
    assert facts_by_turn(source) == [(t, fact_for(TURNS[t])) for t in (1, 2, 3)]
    assert facts_by_turn(fork) == [(1, fact_for(TURNS[1])), (2, fact_for(TURNS[2]))]


def test_a_fork_of_a_finished_source_queues_nothing_more(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    llm_server.responder = narrative_facts_responder()
    with django_capture_on_commit_callbacks(execute=True):
        source = save_create(universe=living_universe, name="Source", memory_mode=MemoryMode.LIVING)
        for text in (TURNS[1], TURNS[2]):
            turn_append(game_save=Save.objects.get(pk=source.pk), player_input="go", narrative=text)
    assert not Job.objects.filter(game_save=source).exclude(status=JobStatus.DONE).exists()
    extractions = len(llm_server.requests)
    with django_capture_on_commit_callbacks(execute=True):
        fork = CheckpointManager(vector_memory=fake_vectors).fork(Save.objects.get(pk=source.pk), 2)
    assert list(Job.objects.filter(game_save=fork).values_list("kind", flat=True)) == [JobKind.FORK_VECTORS]
    assert Job.objects.get(game_save=fork).result["embedded_turns"] == []
    assert len(llm_server.requests) == extractions
    assert facts_by_turn(fork) == facts_by_turn(source)


def test_an_edit_the_source_had_not_reextracted_is_reextracted_by_the_fork_without_doubling(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    llm_server.responder = narrative_facts_responder()
    edited = "Mirela gives Kaël the lantern for nothing."
    with django_capture_on_commit_callbacks(execute=True):
        source = save_create(universe=living_universe, name="Source", memory_mode=MemoryMode.LIVING)
        for text in (TURNS[1], TURNS[2]):
            turn_append(game_save=Save.objects.get(pk=source.pk), player_input="go", narrative=text)
    with django_capture_on_commit_callbacks(execute=False):  # the re-extraction waits in the queue
        turn_update_narrative(game_save=Save.objects.get(pk=source.pk), turn_id=2, narrative=edited)
    with django_capture_on_commit_callbacks(execute=True):
        fork = CheckpointManager(vector_memory=fake_vectors).fork(Save.objects.get(pk=source.pk), 2)
    drain(fork)
    # The old narrative's fact was copied, then replaced: turn 2 has the edited one only.
    assert facts_by_turn(fork) == [(1, fact_for(TURNS[1])), (2, fact_for(edited))]
    assert fake_vectors.texts(fork.save_id) == {1: [TURNS[1]], 2: [edited]}
    redo = Job.objects.get(game_save=fork, kind=JobKind.LIVING_TURN)
    assert (redo.turn_id, redo.status, redo.payload.get("reextract")) == (2, JobStatus.DONE, True)
    assert facts_by_turn(source) == [(1, fact_for(TURNS[1])), (2, fact_for(TURNS[2]))]  # not run yet there


def test_a_fork_rewound_before_its_copy_ran_does_not_embed_the_dropped_turns(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    llm_server.responder = narrative_facts_responder()
    with django_capture_on_commit_callbacks(execute=True):
        source = save_create(universe=living_universe, name="Source", memory_mode=MemoryMode.LIVING)
    queue_turns(django_capture_on_commit_callbacks, source, [TURNS[1], TURNS[2], TURNS[3]])
    manager = CheckpointManager(vector_memory=fake_vectors)
    with django_capture_on_commit_callbacks(execute=False):  # the copy has not run yet
        fork = manager.fork(Save.objects.get(pk=source.pk), 3)
    with django_capture_on_commit_callbacks(execute=True):
        manager.rewind(Save.objects.get(pk=fork.pk), 1)
    assert manager.finish_fork_vectors(Save.objects.get(pk=fork.pk))["done"] == 1
    drain(fork)
    assert facts_by_turn(fork) == [(1, fact_for(TURNS[1]))]
    assert fake_vectors.texts(fork.save_id) == {1: [TURNS[1]]}
    assert Job.objects.get(game_save=fork, kind=JobKind.FORK_VECTORS).result["embedded_turns"] == [1]


# -- the report's way: through the API, on the in-process pool, a source job running -----------


@pytest.mark.django_db(transaction=True)
def test_a_fork_made_while_the_source_works_ends_with_a_finished_sources_memory(
    living_universe, settings, llm_server, monkeypatch, playtester
):
    vectors, hold = live_pool(settings, monkeypatch, llm_server)
    source = save_create(universe=living_universe, name="Source", memory_mode=MemoryMode.LIVING)
    api = engine_api(playtester)
    try:
        play_while_held(api, source, llm_server)
        # Turn 1's living job is running (the model holds it), turns 2-3 wait behind it.
        pending = dict(Job.objects.filter(game_save=source, kind=JobKind.LIVING_TURN).values_list("turn_id", "status"))
        assert pending == {1: JobStatus.RUNNING, 2: JobStatus.QUEUED, 3: JobStatus.QUEUED}
        response = api.post(f"/api/v1/saves/{source.save_id}/fork", {"turn_id": 2, "name": "Early fork"})
        assert response.status_code == 201, response.content
        fork = Save.objects.get(save_id=response.json()["save_id"])
    finally:
        hold.set()
    try:
        wait_idle(source)
        wait_idle(fork)
        # A fork made once the source had finished: what the early fork must equal.
        response = api.post(f"/api/v1/saves/{source.save_id}/fork", {"turn_id": 2, "name": "Late fork"})
        assert response.status_code == 201, response.content
        late = Save.objects.get(save_id=response.json()["save_id"])
        wait_idle(late)
    finally:
        jobs.shutdown_inprocess_runner()
    for turn in (1, 2):
        body = api.post(f"/api/v1/saves/{fork.save_id}/query", {"query_text": TURNS[turn], "k": 3}).json()
        assert (turn, TURNS[turn]) in [(r["turn_id"], r["text"]) for r in body["results"]], body
    facts = api.get(f"/api/v1/saves/{fork.save_id}/facts", {"limit": 100}).json()["items"]
    assert sorted((f["turn_id"], f["statement"]) for f in facts) == [(t, fact_for(TURNS[t])) for t in (1, 2)]
    assert facts_by_turn(fork) == facts_by_turn(late)
    assert beliefs(fork) == beliefs(late) and beliefs(fork)  # consolidated once, as the source did
    narrative = sorted(c["turn_id"] for c in vectors.get_chunks(fork.save_id) if c.get("chunk_type") == "narrative")
    assert narrative == [1, 2]
    # The source is unaffected: all three turns remembered, each once.
    assert facts_by_turn(source) == [(t, fact_for(TURNS[t])) for t in (1, 2, 3)]
    narrative = sorted(c["turn_id"] for c in vectors.get_chunks(source.save_id) if c.get("chunk_type") == "narrative")
    assert narrative == [1, 2, 3]
