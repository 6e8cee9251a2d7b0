"""Job tracking, dispatch and the living pipeline, run in-process (no broker)."""

from __future__ import annotations

import os
import socket
import time
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from studio.memory import jobs
from studio.memory.models import Fact, Job, JobKind, JobStatus, LLMCall, MentalModel, Observation
from studio.world.models import EmbeddingState, Event, LoreEntry, MemoryMode, Save, StateCache
from studio.saves.services import save_create, turn_append, turn_update_narrative
from tests.llm_server import Reply, operation_of, scripted_pipeline_responder, user_prompt

pytestmark = pytest.mark.django_db


def living_save(universe, capture, **kwargs) -> Save:
    with capture(execute=True):
        return save_create(universe=universe, name="Living run", memory_mode=MemoryMode.LIVING, **kwargs)


def append(capture, save, narrative, state=None):
    with capture(execute=True):
        return turn_append(game_save=save, player_input="look", narrative=narrative, state=state)


# -- services ---------------------------------------------------------------------------------


def test_save_create_copies_meta_and_syncs_lore(universe, eager_jobs, fake_vectors, django_capture_on_commit_callbacks):
    save = living_save(universe, django_capture_on_commit_callbacks)
    assert save.meta == {"belief_mission": "Remember debts."}
    job = Job.objects.get(game_save=save, kind=JobKind.SYNC_LORE)
    assert job.status == JobStatus.DONE
    (call,) = fake_vectors.named("sync_lore")
    assert call[1] == save.save_id
    kael = next(e for e in call[2] if e["entry_id"] == "kael")
    assert kael == {"entry_id": "kael", "title": "Kaël", "text": "Kaël is a smuggler.", "links": ["port-vey"]}


def test_turn_append_stores_turn_and_embeds_it(game_save, eager_jobs, fake_vectors, django_capture_on_commit_callbacks):
    event = append(django_capture_on_commit_callbacks, game_save, "The tide turns.", state={"hp": 3})
    assert event.turn_id == 4
    game_save.refresh_from_db()
    assert game_save.current_turn == 4
    assert StateCache.objects.get(game_save=game_save, turn_id=4).state == {"hp": 3}
    job = Job.objects.get(game_save=game_save, turn_id=4)
    assert (job.kind, job.status) == (JobKind.EMBED_TURN, JobStatus.DONE)
    assert ("update_turn_narrative", game_save.save_id, 4, "The tide turns.") in fake_vectors.calls
    # classic mode: no living pipeline
    assert not Job.objects.filter(game_save=game_save, kind=JobKind.LIVING_TURN).exists()


def test_jobs_are_enqueued_only_on_commit(game_save, eager_jobs, fake_vectors, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        turn_append(game_save=game_save, player_input="", narrative="Quiet.")
    job = Job.objects.get(game_save=game_save, turn_id=4)
    assert job.status == JobStatus.QUEUED and fake_vectors.calls == []
    assert len(callbacks) == 1


def test_living_without_llm_is_skipped_and_classic_memory_still_embeds(
    universe, eager_jobs, fake_vectors, settings, django_capture_on_commit_callbacks
):
    settings.AXIOM_LLM_BASE_URL = ""
    save = living_save(universe, django_capture_on_commit_callbacks)
    append(django_capture_on_commit_callbacks, save, "Kaël pays.")
    living = Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN)
    assert living.status == JobStatus.SKIPPED
    assert living.progress == "skipped: no LLM configured"
    assert Job.objects.get(game_save=save, kind=JobKind.EMBED_TURN).status == JobStatus.DONE
    assert not Fact.objects.exists()


# -- the living pipeline ------------------------------------------------------------------------


def test_living_turn_writes_facts_beliefs_and_model(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    save = living_save(living_universe, django_capture_on_commit_callbacks)
    append(
        django_capture_on_commit_callbacks,
        save,
        "Kaël pays the harbour master and spits at the Guild.",
        state={"time": "Day 3, dusk"},
    )
    job = Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN)
    assert job.status == JobStatus.DONE, job.error
    facts = list(Fact.objects.filter(game_save=save).order_by("id"))
    assert [f.statement for f in facts] == ["Kaël paid his debt to the harbour master.", "Kaël distrusts the Guild."]
    assert all(f.turn_id == 1 for f in facts)
    assert facts[0].when == "Day 3, dusk (turn 1)"  # the when hint fills a fact that states no time
    beliefs = list(Observation.objects.filter(game_save=save).order_by("id"))
    assert [b.statement for b in beliefs] == ["Kaël settles his debts.", "Kaël distrusts the Guild."]
    # provisional ids 1 and 2 in the prompt became the real fact ids
    assert beliefs[0].sources == [{"fact_id": facts[0].pk, "turn_id": 1}]
    assert beliefs[1].sources == [{"fact_id": facts[1].pk, "turn_id": 1}]
    model = MentalModel.objects.get(game_save=save)
    assert model.subject == "Kaël" and "smuggler" in model.summary
    assert sorted(model.sources) == sorted(b.pk for b in beliefs)
    assert job.llm_calls == 3 and LLMCall.objects.filter(job=job).count() == 3
    assert job.llm_tokens == 45
    assert job.result["facts"] == 2 and job.result["mental_models"] == ["Kaël"]

    (extract,) = llm_server.requests_for("extract")
    prompt = user_prompt(extract)
    assert "Kaël; Port Vey" in prompt  # known entities from the Lore Book
    assert "Day 3, dusk (turn 1)" in prompt  # the when hint
    assert "Kaël pays the harbour master" in prompt
    assert extract["response_format"]["type"] == "json_schema"  # structured output with the facts schema
    (consolidation,) = llm_server.requests_for("consolidate")
    prompt = user_prompt(consolidation)
    assert "WORLD MEMORY MISSION: Remember debts." in prompt
    assert "- Kaël: Remembers every slight." in prompt
    assert "Mirela" not in prompt  # her mission stays out: she is not in this batch
    assert "[1] Kaël paid his debt" in prompt
    (reflection,) = llm_server.requests_for("reflect")
    assert "SUBJECT: Kaël" in user_prompt(reflection)
    assert "MEMORY MISSION: Remembers every slight." in user_prompt(reflection)


def test_consolidation_prompt_caps_existing_beliefs(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    save = living_save(living_universe, django_capture_on_commit_callbacks)
    for i in range(30):
        Observation.objects.create(game_save=save, statement=f"World belief {i}.", subject="", updated_turn_id=0)
    Observation.objects.create(game_save=save, statement="Kaël fears deep water.", subject="Kaël")
    append(django_capture_on_commit_callbacks, save, "Kaël pays.")
    prompt = user_prompt(llm_server.requests_for("consolidate")[0])
    shown = [line for line in prompt.splitlines() if line.startswith("[") and "supporting facts" in line]
    assert len(shown) == 24
    assert any("Kaël fears deep water." in line for line in shown)  # the batch's character comes first


def test_beliefs_off_extracts_facts_only(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    save = living_save(living_universe, django_capture_on_commit_callbacks, beliefs_enabled=False)
    append(django_capture_on_commit_callbacks, save, "Kaël pays.")
    assert Fact.objects.filter(game_save=save).count() == 2
    assert not Observation.objects.exists() and not MentalModel.objects.exists()
    assert llm_server.requests_for("consolidate") == []


@pytest.mark.parametrize(
    "failing, reply",
    [
        ("extract", Reply(content="Sorry, I can't help with that.")),
        ("consolidate", Reply(content="<<<not json>>>")),
        ("reflect", Reply(content="")),
        ("consolidate", Reply(status=500)),
    ],
)
def test_a_bad_answer_at_any_step_writes_nothing(
    failing, reply, living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    good = scripted_pipeline_responder()
    llm_server.responder = lambda request: reply if operation_of(request) == failing else good(request)
    save = living_save(living_universe, django_capture_on_commit_callbacks)
    append(django_capture_on_commit_callbacks, save, "Kaël pays.")
    job = Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN)
    assert job.status == JobStatus.FAILED
    assert job.error
    assert not Fact.objects.exists() and not Observation.objects.exists() and not MentalModel.objects.exists()
    assert LLMCall.objects.filter(job=job).count() >= 1
    # the turn itself and its embedding are untouched
    assert Event.objects.filter(game_save=save, turn_id=1).exists()
    assert Job.objects.get(game_save=save, kind=JobKind.EMBED_TURN).status == JobStatus.DONE


def test_llm_500_is_retried_by_the_client_then_recorded(
    living_universe, eager_jobs, fake_vectors, llm_server, settings, django_capture_on_commit_callbacks
):
    llm_server.responder = lambda request: Reply(status=500)
    save = living_save(living_universe, django_capture_on_commit_callbacks)
    append(django_capture_on_commit_callbacks, save, "Kaël pays.")
    job = Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN)
    assert job.status == JobStatus.FAILED and "HTTP 500" in job.error
    assert len(llm_server.requests) == 2  # one try + AXIOM_LLM_MAX_RETRIES=1
    call = LLMCall.objects.get(job=job)
    assert "HTTP 500" in call.error and call.operation == "extract"


def test_llm_timeout_is_recorded(
    living_universe, eager_jobs, fake_vectors, llm_server, settings, django_capture_on_commit_callbacks
):
    settings.AXIOM_LLM_TIMEOUT = 0.3
    settings.AXIOM_LLM_MAX_RETRIES = 0
    llm_server.responder = lambda request: Reply(content="{}", delay=1.5)
    save = living_save(living_universe, django_capture_on_commit_callbacks)
    append(django_capture_on_commit_callbacks, save, "Kaël pays.")
    job = Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN)
    assert job.status == JobStatus.FAILED and "timed out" in job.error
    assert not Fact.objects.exists()


def test_failed_job_is_retried_with_backoff_until_it_succeeds(
    living_universe, eager_jobs, fake_vectors, llm_server, settings, django_capture_on_commit_callbacks
):
    settings.AXIOM_JOB_MAX_ATTEMPTS = 3
    good = scripted_pipeline_responder()
    answers = iter([Reply(content="garbage"), None])

    def flaky(request):
        if operation_of(request) == "extract":
            reply = next(answers, None)
            if reply is not None:
                return reply
        return good(request)

    llm_server.responder = flaky
    save = living_save(living_universe, django_capture_on_commit_callbacks)
    append(django_capture_on_commit_callbacks, save, "Kaël pays.")
    job = Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN)
    assert job.status == JobStatus.DONE
    assert job.attempts == 2
    assert Fact.objects.filter(game_save=save).count() == 2


def test_spend_guard_pauses_with_a_visible_reason(
    living_universe, eager_jobs, fake_vectors, llm_server, settings, django_capture_on_commit_callbacks
):
    settings.AXIOM_LLM_CALLS_PER_HOUR = 2  # extract and consolidate fit, reflect does not
    save = living_save(living_universe, django_capture_on_commit_callbacks)
    append(django_capture_on_commit_callbacks, save, "Kaël pays.")
    job = Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN)
    assert job.status == JobStatus.PAUSED
    assert "spend guard" in job.progress and "2 LLM calls in the last hour (cap 2)" in job.error
    assert job.payload.get("not_before")
    assert not Fact.objects.exists()
    assert len(llm_server.requests) == 2
    # the next turn waits behind the paused one (turn order)
    append(django_capture_on_commit_callbacks, save, "Kaël leaves.")
    later = Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN, turn_id=2)
    assert later.status == JobStatus.QUEUED and len(llm_server.requests) == 2
    assert later.progress == "waiting: turn 1 is paused and must be processed first"


def test_token_cap_counts_the_hour(
    living_universe, eager_jobs, fake_vectors, llm_server, settings, django_capture_on_commit_callbacks
):
    settings.AXIOM_LLM_TOKENS_PER_HOUR = 100
    save = living_save(living_universe, django_capture_on_commit_callbacks)
    LLMCall.objects.create(game_save=save, operation="extract", prompt_tokens=90, completion_tokens=20)
    append(django_capture_on_commit_callbacks, save, "Kaël pays.")
    job = Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN)
    assert job.status == JobStatus.PAUSED and "110 LLM tokens" in job.error
    assert llm_server.requests == []


def test_turns_are_consolidated_in_order_and_a_failed_turn_blocks_later_ones(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    good = scripted_pipeline_responder()
    state = {"broken": True}

    def responder(request):
        if state["broken"] and "first" in user_prompt(request):
            return Reply(status=400)  # refused: not retried
        return good(request)

    llm_server.responder = responder
    save = living_save(living_universe, django_capture_on_commit_callbacks)
    append(django_capture_on_commit_callbacks, save, "The first turn.")
    append(django_capture_on_commit_callbacks, save, "The second turn.")
    first = Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN, turn_id=1)
    second = Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN, turn_id=2)
    assert first.status == JobStatus.FAILED
    assert second.status == JobStatus.QUEUED
    assert second.progress == "waiting: turn 1 failed and must be processed first (retry it)"
    assert not Fact.objects.exists()

    state["broken"] = False
    with django_capture_on_commit_callbacks(execute=True):
        jobs.job_retry(job=first)
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.status == JobStatus.DONE and second.status == JobStatus.DONE
    assert first.finished_at <= second.started_at
    assert list(Fact.objects.filter(game_save=save).order_by("id").values_list("turn_id", flat=True)) == [1, 1, 2, 2]


@pytest.mark.django_db(transaction=True)
def test_rewind_during_llm_call_writes_nothing(living_universe, eager_jobs, fake_vectors, llm_server):
    from studio.saves.checkpoints import CheckpointManager

    good = scripted_pipeline_responder()
    save = save_create(universe=living_universe, name="Living run", memory_mode=MemoryMode.LIVING)

    def responder(request):
        if operation_of(request) == "consolidate":
            # a rewind (from another thread) lands while the job waits for the model
            try:
                CheckpointManager(vector_memory=fake_vectors).rewind(Save.objects.get(pk=save.pk), 0)
            finally:
                connections.close_all()  # this server thread's connection
        return good(request)

    llm_server.responder = responder
    turn_append(game_save=save, player_input="", narrative="Kaël pays.")
    job = Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN)
    assert job.status == JobStatus.SKIPPED
    assert "timeline rewound" in job.progress
    assert not Fact.objects.exists() and not Observation.objects.exists()


def test_job_from_before_a_rewind_is_skipped(game_save, eager_jobs, fake_vectors, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        turn_append(game_save=game_save, player_input="", narrative="Old timeline.")
    Save.objects.filter(pk=game_save.pk).update(timeline_generation=5, current_turn=3)
    job = Job.objects.get(game_save=game_save, turn_id=4)
    jobs.run_job(job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.SKIPPED and fake_vectors.named("update_turn_narrative") == []


def test_edit_reextracts_the_turn_without_duplicates(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    save = living_save(living_universe, django_capture_on_commit_callbacks)
    append(django_capture_on_commit_callbacks, save, "Kaël pays.")
    assert Fact.objects.filter(game_save=save).count() == 2
    llm_server.responder = scripted_pipeline_responder(
        facts=[{"statement": "Kaël refused to pay.", "entities": ["Kaël"]}],
        actions=[{"action": "CREATE", "subject": "Kaël", "statement": "Kaël keeps his coin.", "source_fact_ids": [1]}],
    )
    with django_capture_on_commit_callbacks(execute=True):
        turn_update_narrative(game_save=save, turn_id=1, narrative="Kaël refuses to pay.")
    assert list(Fact.objects.filter(game_save=save).values_list("statement", flat=True)) == ["Kaël refused to pay."]
    assert list(Observation.objects.filter(game_save=save).values_list("statement", flat=True)) == [
        "Kaël keeps his coin."
    ]
    assert ("update_turn_narrative", save.save_id, 1, "Kaël refuses to pay.") in fake_vectors.calls
    assert Event.objects.get(game_save=save, turn_id=1).narrative == "Kaël refuses to pay."


def test_running_a_done_job_again_changes_nothing(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    save = living_save(living_universe, django_capture_on_commit_callbacks)
    append(django_capture_on_commit_callbacks, save, "Kaël pays.")
    job = Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN)
    requests = len(llm_server.requests)
    jobs.run_job(job.pk)
    with pytest.raises(jobs.JobNotRetryable):  # a done job's results stand
        jobs.job_retry(job=job)
    assert Fact.objects.count() == 2 and Observation.objects.count() == 2
    assert len(llm_server.requests) == requests


def test_a_job_of_a_dead_runner_is_reclaimed_and_run_once(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    save = living_save(living_universe, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=False):
        turn_append(game_save=save, player_input="", narrative="Kaël pays.")
    job = Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN)
    dead_pid = 2**22 + 12345
    while True:
        try:
            os.kill(dead_pid, 0)
            dead_pid += 1
        except ProcessLookupError:
            break
    Job.objects.filter(pk=job.pk).update(
        status=JobStatus.RUNNING,
        attempts=1,
        started_at=timezone.now(),
        payload={"worker": f"{socket.gethostname()}|{dead_pid}|1"},
    )
    jobs.run_job(job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.DONE and job.attempts == 2
    assert Fact.objects.filter(game_save=save).count() == 2


def test_a_live_runner_keeps_its_job(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    save = living_save(living_universe, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=False):
        turn_append(game_save=save, player_input="", narrative="Kaël pays.")
    job = Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN)
    # first started long ago (a paused job resumed), claimed just now by a live process
    Job.objects.filter(pk=job.pk).update(
        status=JobStatus.RUNNING,
        started_at=timezone.now() - timedelta(hours=2),
        payload={"worker": f"{socket.gethostname()}|1|1", "claimed_at": timezone.now().isoformat()},
    )
    jobs.run_job(job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING and not Fact.objects.exists()
    # a claim older than the hard time limit means the runner is gone, wherever it ran
    Job.objects.filter(pk=job.pk).update(
        payload={"worker": "another-host|1|1", "claimed_at": (timezone.now() - timedelta(hours=1)).isoformat()}
    )
    jobs.run_job(job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.DONE and Fact.objects.count() == 2


# -- lore sync ----------------------------------------------------------------------------------


def test_universe_lore_sync_embeds_scope_then_each_save(
    game_save, universe, eager_jobs, fake_vectors, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        job = jobs.enqueue_sync_lore(universe=universe)
    job.refresh_from_db()
    assert job.status == JobStatus.DONE
    scopes = [c[1] for c in fake_vectors.named("sync_lore")]
    assert scopes == [universe.lore_scope_id, game_save.save_id]
    assert set(LoreEntry.objects.values_list("embedding_state", flat=True)) == {EmbeddingState.EMBEDDED}
    save_job = Job.objects.get(game_save=game_save, kind=JobKind.SYNC_LORE)
    assert save_job.status == JobStatus.DONE and job.result["save_jobs"] == [save_job.pk]


def test_lore_sync_failure_marks_entries_failed(universe, eager_jobs, fake_vectors, django_capture_on_commit_callbacks):
    fake_vectors.fail_with = ConnectionError("chroma is down")
    with django_capture_on_commit_callbacks(execute=True):
        job = jobs.enqueue_sync_lore(universe=universe)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and "chroma is down" in job.error
    entry = LoreEntry.objects.get(entry_id="kael")
    assert entry.embedding_state == EmbeddingState.FAILED and "chroma is down" in entry.embedding_error


def test_queued_lore_syncs_are_coalesced(universe, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        first = jobs.enqueue_sync_lore(universe=universe)
        second = jobs.enqueue_sync_lore(universe=universe)
    assert first.pk == second.pk
    assert LoreEntry.objects.filter(embedding_state=EmbeddingState.PENDING).count() == 2


# -- the broker and the in-process pool --------------------------------------------------------


def test_redis_down_keeps_the_turn_and_marks_jobs_retryable(
    game_save, settings, fake_vectors, django_capture_on_commit_callbacks
):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    settings.AXIOM_JOBS_EAGER = False
    with django_capture_on_commit_callbacks(execute=True):
        event = turn_append(game_save=game_save, player_input="", narrative="Saved anyway.")
    assert Event.objects.filter(pk=event.pk, narrative="Saved anyway.").exists()
    job = Job.objects.get(game_save=game_save, turn_id=event.turn_id)
    assert job.status == JobStatus.FAILED
    assert job.error.startswith(jobs.QUEUE_DOWN_PREFIX) and "retry this job" in job.error
    # once the queue is back, the retry runs it
    settings.REDIS_URL = ""
    settings.AXIOM_JOBS_EAGER = True
    with django_capture_on_commit_callbacks(execute=True):
        jobs.job_retry(job=job)
    job.refresh_from_db()
    assert job.status == JobStatus.DONE
    assert ("update_turn_narrative", game_save.save_id, 4, "Saved anyway.") in fake_vectors.calls


@pytest.mark.django_db(transaction=True)
def test_inprocess_pool_runs_jobs_without_blocking_the_request(universe, settings, fake_vectors, llm_server):
    settings.REDIS_URL = ""
    settings.AXIOM_JOBS_EAGER = False
    hold = __import__("threading").Event()
    good = scripted_pipeline_responder()
    llm_server.responder = lambda r: (
        Reply(content=good(r).content, hold=hold) if operation_of(r) == "extract" else good(r)
    )
    save = save_create(universe=universe, name="Threads", memory_mode=MemoryMode.LIVING)
    turn_append(game_save=save, player_input="", narrative="Kaël pays.")
    # turn_append returned while the extraction is still held by the server
    assert llm_server.wait_for("extract", timeout=20)
    assert Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN).status == JobStatus.RUNNING
    hold.set()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not Job.objects.filter(game_save=save, status__in=(JobStatus.QUEUED, JobStatus.RUNNING)).exists():
            break
        time.sleep(0.05)
    jobs.shutdown_inprocess_runner()
    statuses = dict(Job.objects.filter(game_save=save).values_list("kind", "status"))
    assert statuses == {
        JobKind.SYNC_LORE: JobStatus.DONE,
        JobKind.EMBED_TURN: JobStatus.DONE,
        JobKind.LIVING_TURN: JobStatus.DONE,
    }
    assert Fact.objects.filter(game_save=save).count() == 2


def test_jobs_for_save_lists_newest_first(game_save, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        turn_append(game_save=game_save, player_input="", narrative="a")
        turn_append(game_save=game_save, player_input="", narrative="b")
    assert [j.turn_id for j in jobs.jobs_for_save(game_save=game_save)] == [5, 4]


def test_redis_down_marks_a_universe_lore_sync_failed_on_its_entries(
    universe, settings, django_capture_on_commit_callbacks
):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    settings.AXIOM_JOBS_EAGER = False
    with django_capture_on_commit_callbacks(execute=True):
        job = jobs.enqueue_sync_lore(universe=universe)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    entry = LoreEntry.objects.get(entry_id="kael")
    assert entry.embedding_state == EmbeddingState.FAILED
    assert entry.embedding_error.startswith(jobs.QUEUE_DOWN_PREFIX)


def test_jobs_resume_command_runs_what_was_left_queued(
    game_save, eager_jobs, fake_vectors, django_capture_on_commit_callbacks
):
    from django.core.management import call_command

    with django_capture_on_commit_callbacks(execute=False):  # the process "died" before dispatch
        turn_append(game_save=game_save, player_input="", narrative="Left behind.")
    job = Job.objects.get(game_save=game_save, turn_id=4)
    assert job.status == JobStatus.QUEUED
    call_command("jobs_resume", stdout=open(os.devnull, "w"))
    job.refresh_from_db()
    assert job.status == JobStatus.DONE
    assert ("update_turn_narrative", game_save.save_id, 4, "Left behind.") in fake_vectors.calls
