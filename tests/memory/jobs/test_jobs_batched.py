"""The runner's batched path: several queued turns of a save claimed at once.

Turns are appended with their on-commit dispatch dropped (`execute=False`), so they wait
in the queue as they do behind a busy worker; `run_job` then drains them in batches.
"""

from __future__ import annotations

import os
import socket

import pytest
from django.db import connections

from studio.memory import jobs
from studio.memory.models import Fact, Job, JobKind, JobStatus, Observation
from studio.world.models import MemoryMode, Save
from studio.saves.services import save_create, turn_append
from tests.llm_server import Reply, operation_of, scripted_pipeline_responder, user_prompt
from tests.memory.jobs.rewind_race import queue_turns

pytestmark = pytest.mark.django_db


def living_save(universe, capture):
    with capture(execute=True):
        return save_create(universe=universe, name="Living run", memory_mode=MemoryMode.LIVING)


def first_job(save, kind):
    return Job.objects.filter(game_save=save, kind=kind).order_by("turn_id", "id").first()


def statuses(save, kind):
    return dict(Job.objects.filter(game_save=save, kind=kind).values_list("turn_id", "status"))


def extract_prompts(server):
    return [user_prompt(r) for r in server.requests if operation_of(r) == "extract"]


def dead_worker() -> str:
    pid = 2**22 + 4242
    while True:
        try:
            os.kill(pid, 0)
            pid += 1
        except ProcessLookupError:
            return f"{socket.gethostname()}|{pid}|1"


# -- embedding batches --------------------------------------------------------------------------


def test_queued_turns_are_embedded_with_one_call_in_turn_order(
    game_save, eager_jobs, fake_vectors, django_capture_on_commit_callbacks
):
    turns = queue_turns(django_capture_on_commit_callbacks, game_save, [f"Tide {n}." for n in range(5)])
    assert turns == [4, 5, 6, 7, 8]
    jobs.run_job(first_job(game_save, JobKind.EMBED_TURN).pk)

    (call,) = fake_vectors.named("update_turn_narratives")
    assert call[2] == [(4, "Tide 0."), (5, "Tide 1."), (6, "Tide 2."), (7, "Tide 3."), (8, "Tide 4.")]
    assert fake_vectors.named("update_turn_narrative") == []
    done = Job.objects.filter(game_save=game_save, kind=JobKind.EMBED_TURN)
    assert {j.status for j in done} == {JobStatus.DONE}
    assert all(j.result["batch"] == 5 and j.attempts == 1 and j.finished_at for j in done)
    assert fake_vectors.texts(game_save.save_id) == {t: [f"Tide {t - 4}."] for t in turns}
    assert fake_vectors.bumps == 1  # one corpus-version bump for the batch (no old chunks)


def test_batch_size_setting_caps_a_claim(game_save, eager_jobs, fake_vectors, django_capture_on_commit_callbacks):
    eager_jobs.AXIOM_JOB_BATCH_SIZE = 2
    queue_turns(django_capture_on_commit_callbacks, game_save, [f"Turn {n}." for n in range(5)])
    jobs.run_job(first_job(game_save, JobKind.EMBED_TURN).pk)
    batches = [[turn for turn, _text in call[2]] for call in fake_vectors.named("update_turn_narratives")]
    # the last one is alone: a single turn goes through update_turn_narrative
    assert batches == [[4, 5], [6, 7]]
    assert [c[2] for c in fake_vectors.named("update_turn_narrative")] == [8]
    assert set(statuses(game_save, JobKind.EMBED_TURN).values()) == {JobStatus.DONE}


def test_batch_size_one_keeps_the_single_turn_path(
    game_save, eager_jobs, fake_vectors, django_capture_on_commit_callbacks
):
    eager_jobs.AXIOM_JOB_BATCH_SIZE = 1
    queue_turns(django_capture_on_commit_callbacks, game_save, ["A.", "B.", "C."])
    jobs.run_job(first_job(game_save, JobKind.EMBED_TURN).pk)
    assert fake_vectors.named("update_turn_narratives") == []
    assert [c[2] for c in fake_vectors.named("update_turn_narrative")] == [4, 5, 6]


def test_rerunning_an_embedding_batch_replaces_instead_of_duplicating(
    game_save, eager_jobs, fake_vectors, django_capture_on_commit_callbacks
):
    turns = queue_turns(django_capture_on_commit_callbacks, game_save, ["One.", "Two.", "Three."])
    jobs.run_job(first_job(game_save, JobKind.EMBED_TURN).pk)
    # a crash after the embedding but before the jobs were closed: they run again
    Job.objects.filter(game_save=game_save, kind=JobKind.EMBED_TURN).update(
        status=JobStatus.RUNNING, payload={"worker": dead_worker()}
    )
    jobs.run_job(first_job(game_save, JobKind.EMBED_TURN).pk)
    # the re-run may find chunks of its first run: each turn is replaced, not added again
    batch = [(turns[0], "One."), (turns[1], "Two."), (turns[2], "Three.")]
    assert [c[2] for c in fake_vectors.named("update_turn_narratives")] == [batch, batch]
    assert fake_vectors.texts(game_save.save_id) == {turns[0]: ["One."], turns[1]: ["Two."], turns[2]: ["Three."]}
    assert set(statuses(game_save, JobKind.EMBED_TURN).values()) == {JobStatus.DONE}
    # done jobs run again do nothing
    calls = len(fake_vectors.calls)
    jobs.run_job(first_job(game_save, JobKind.EMBED_TURN).pk)
    assert len(fake_vectors.calls) == calls


def test_an_edited_turn_in_a_batch_is_replaced_and_new_turns_are_embedded_together(
    game_save, eager_jobs, fake_vectors, django_capture_on_commit_callbacks
):
    from studio.saves.services import turn_update_narrative

    queue_turns(django_capture_on_commit_callbacks, game_save, ["Four.", "Five.", "Six."])
    jobs.run_job(first_job(game_save, JobKind.EMBED_TURN).pk)
    with django_capture_on_commit_callbacks(execute=False):
        turn_update_narrative(game_save=game_save, turn_id=5, narrative="Five, edited.")
    queue_turns(django_capture_on_commit_callbacks, game_save, ["Seven.", "Eight."])
    jobs.run_job(Job.objects.filter(game_save=game_save, status=JobStatus.QUEUED).first().pk)
    # the edit replaces turn 5's chunks in the same call that embeds the new turns
    assert fake_vectors.named("update_turn_narratives")[-1][2] == [(5, "Five, edited."), (7, "Seven."), (8, "Eight.")]
    assert fake_vectors.texts(game_save.save_id) == {
        4: ["Four."],
        5: ["Five, edited."],
        6: ["Six."],
        7: ["Seven."],
        8: ["Eight."],
    }


def test_a_turn_number_reused_after_a_rewind_is_replaced(
    game_save, eager_jobs, fake_vectors, django_capture_on_commit_callbacks
):
    queue_turns(django_capture_on_commit_callbacks, game_save, ["Four.", "Five."])
    jobs.run_job(first_job(game_save, JobKind.EMBED_TURN).pk)
    # a rewind whose vector delete did not happen: turn 5's old chunk is still there
    Save.objects.filter(pk=game_save.pk).update(current_turn=4, timeline_generation=1)
    from studio.world.models import Event, StateCache

    Event.objects.filter(game_save=game_save, turn_id=5).delete()
    StateCache.objects.filter(game_save=game_save, turn_id=5).delete()
    game_save.refresh_from_db()
    queue_turns(django_capture_on_commit_callbacks, game_save, ["Five again.", "Six."])
    jobs.run_job(Job.objects.filter(game_save=game_save, status=JobStatus.QUEUED).first().pk)
    assert fake_vectors.texts(game_save.save_id) == {4: ["Four."], 5: ["Five again."], 6: ["Six."]}


def test_a_rewind_during_batch_embedding_skips_the_batch_and_removes_its_chunks(
    game_save, eager_jobs, fake_vectors, django_capture_on_commit_callbacks, monkeypatch
):
    queue_turns(django_capture_on_commit_callbacks, game_save, ["Four.", "Five.", "Six."])
    real = fake_vectors.update_turn_narratives

    def embed_then_rewind(save_id, texts, **kwargs):
        result = real(save_id, texts, **kwargs)
        Save.objects.filter(pk=game_save.pk).update(current_turn=4, timeline_generation=1)
        return result

    monkeypatch.setattr(fake_vectors, "update_turn_narratives", embed_then_rewind)
    jobs.run_job(first_job(game_save, JobKind.EMBED_TURN).pk)
    assert ("rollback", game_save.save_id, 4) in fake_vectors.calls
    assert set(fake_vectors.texts(game_save.save_id)) == {4}
    assert set(statuses(game_save, JobKind.EMBED_TURN).values()) == {JobStatus.SKIPPED}
    assert all(
        "timeline rewound" in j.progress for j in Job.objects.filter(game_save=game_save, kind=JobKind.EMBED_TURN)
    )


def test_a_failed_embedding_batch_falls_back_to_one_turn_at_a_time(
    game_save, eager_jobs, fake_vectors, django_capture_on_commit_callbacks, monkeypatch
):
    queue_turns(django_capture_on_commit_callbacks, game_save, ["Good four.", "Bad five.", "Good six."])

    def broken_batch(save_id, texts, **kwargs):
        raise RuntimeError("batch refused")

    real_single = fake_vectors.update_turn_narrative

    def single(save_id, turn_id, text, chunk_type="narrative"):
        if text.startswith("Bad"):
            raise RuntimeError("this turn cannot be embedded")
        return real_single(save_id, turn_id, text, chunk_type)

    monkeypatch.setattr(fake_vectors, "update_turn_narratives", broken_batch)
    monkeypatch.setattr(fake_vectors, "update_turn_narrative", single)
    jobs.run_job(first_job(game_save, JobKind.EMBED_TURN).pk)
    assert statuses(game_save, JobKind.EMBED_TURN) == {4: JobStatus.DONE, 5: JobStatus.FAILED, 6: JobStatus.DONE}
    assert "this turn cannot be embedded" in Job.objects.get(game_save=game_save, turn_id=5).error
    assert fake_vectors.texts(game_save.save_id) == {4: ["Good four."], 6: ["Good six."]}


def test_a_dead_runners_batch_is_reclaimed_whole(
    game_save, eager_jobs, fake_vectors, django_capture_on_commit_callbacks
):
    queue_turns(django_capture_on_commit_callbacks, game_save, ["X.", "Y."])
    Job.objects.filter(game_save=game_save, kind=JobKind.EMBED_TURN).update(
        status=JobStatus.RUNNING, attempts=1, payload={"worker": dead_worker(), "batch": 2}
    )
    jobs.run_job(first_job(game_save, JobKind.EMBED_TURN).pk)
    rows = Job.objects.filter(game_save=game_save, kind=JobKind.EMBED_TURN)
    assert {(j.status, j.attempts) for j in rows} == {(JobStatus.DONE, 2)}
    assert fake_vectors.texts(game_save.save_id) == {4: ["X."], 5: ["Y."]}


def test_a_live_runner_with_a_fresh_claim_keeps_its_whole_batch(
    game_save, eager_jobs, fake_vectors, django_capture_on_commit_callbacks
):
    """A batch's first job may be old; the runner is alive while its latest claim is fresh."""
    from datetime import timedelta

    from django.utils import timezone

    queue_turns(django_capture_on_commit_callbacks, game_save, ["X.", "Y."])
    live = "other-host-runner"  # not parseable: alive until its claim is older than the hard limit
    old = (timezone.now() - timedelta(hours=2)).isoformat()
    fresh = timezone.now().isoformat()
    first, second = Job.objects.filter(game_save=game_save, kind=JobKind.EMBED_TURN).order_by("turn_id")
    Job.objects.filter(pk=first.pk).update(status=JobStatus.DONE)
    Job.objects.filter(pk=second.pk).update(status=JobStatus.RUNNING, payload={"worker": live, "claimed_at": fresh})
    older = Job.objects.create(
        kind=JobKind.EMBED_TURN,
        universe_id=game_save.universe_id,
        game_save=game_save,
        turn_id=4,
        status=JobStatus.RUNNING,
        payload={"worker": live, "claimed_at": old},
    )
    assert jobs.claim_batch(second, "me", limit=4) == []
    older.refresh_from_db()
    assert older.status == JobStatus.RUNNING  # not presumed dead: its runner's latest claim is fresh


# -- living batches ---------------------------------------------------------------------------


def test_living_batch_runs_turns_in_order_one_claim(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    save = living_save(living_universe, django_capture_on_commit_callbacks)
    queue_turns(django_capture_on_commit_callbacks, save, [f"Kaël pays debt number {n}." for n in range(1, 5)])
    jobs.run_job(first_job(save, JobKind.EMBED_TURN).pk)

    (embed,) = fake_vectors.named("update_turn_narratives")
    assert [turn for turn, _ in embed[2]] == [1, 2, 3, 4]
    living = list(Job.objects.filter(game_save=save, kind=JobKind.LIVING_TURN).order_by("turn_id"))
    assert [j.status for j in living] == [JobStatus.DONE] * 4
    assert all(j.payload.get("batch") == 4 for j in living)
    for before, after in zip(living, living[1:]):
        assert before.finished_at <= after.started_at
    prompts = extract_prompts(llm_server)
    assert [n for n in range(1, 5) for p in prompts if f"debt number {n}." in p] == [1, 2, 3, 4]
    assert list(Fact.objects.filter(game_save=save).order_by("id").values_list("turn_id", flat=True)) == [
        1,
        1,
        2,
        2,
        3,
        3,
        4,
        4,
    ]


def test_a_failing_turn_in_a_living_batch_holds_back_later_turns_and_keeps_earlier_ones(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    good = scripted_pipeline_responder()
    state = {"broken": True}

    def responder(request):
        if state["broken"] and "third" in user_prompt(request):
            return Reply(status=400)  # refused: fails at once
        return good(request)

    llm_server.responder = responder
    save = living_save(living_universe, django_capture_on_commit_callbacks)
    queue_turns(django_capture_on_commit_callbacks, save, ["The first.", "The second.", "The third.", "The fourth."])
    jobs.run_job(first_job(save, JobKind.EMBED_TURN).pk)

    assert statuses(save, JobKind.LIVING_TURN) == {
        1: JobStatus.DONE,
        2: JobStatus.DONE,
        3: JobStatus.FAILED,
        4: JobStatus.QUEUED,
    }
    fourth = Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN, turn_id=4)
    assert fourth.attempts == 0 and fourth.started_at is None
    assert fourth.progress == "waiting: turn 3 failed and must be processed first (retry it)"
    assert "worker" not in fourth.payload
    assert list(
        Fact.objects.filter(game_save=save).values_list("turn_id", flat=True).distinct().order_by("turn_id")
    ) == [1, 2]
    assert not any("The fourth." in p for p in extract_prompts(llm_server))

    state["broken"] = False
    with django_capture_on_commit_callbacks(execute=True):
        jobs.job_retry(job=Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN, turn_id=3))
    assert set(statuses(save, JobKind.LIVING_TURN).values()) == {JobStatus.DONE}
    assert list(Fact.objects.filter(game_save=save).order_by("id").values_list("turn_id", flat=True)) == [
        1,
        1,
        2,
        2,
        3,
        3,
        4,
        4,
    ]


def test_a_deferred_turn_in_a_living_batch_releases_the_rest(
    living_universe, eager_jobs, fake_vectors, llm_server, django_capture_on_commit_callbacks
):
    eager_jobs.AXIOM_JOB_MAX_ATTEMPTS = 3
    eager_jobs.AXIOM_JOB_RETRY_BACKOFF = 60
    good = scripted_pipeline_responder()

    def responder(request):
        if "The second." in user_prompt(request):
            return Reply(content="not json at all")  # unusable: retried later
        return good(request)

    llm_server.responder = responder
    save = living_save(living_universe, django_capture_on_commit_callbacks)
    queue_turns(django_capture_on_commit_callbacks, save, ["The first.", "The second.", "The third."])
    jobs.run_job(first_job(save, JobKind.EMBED_TURN).pk)
    assert statuses(save, JobKind.LIVING_TURN) == {1: JobStatus.DONE, 2: JobStatus.QUEUED, 3: JobStatus.QUEUED}
    second = Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN, turn_id=2)
    third = Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN, turn_id=3)
    assert second.attempts == 1 and "not_before" in second.payload
    assert third.attempts == 0 and third.progress == "waiting: turn 2 is waiting to retry and must be processed first"
    assert list(
        Fact.objects.filter(game_save=save).values_list("turn_id", flat=True).order_by("turn_id").distinct()
    ) == [1]


@pytest.mark.django_db(transaction=True)
def test_a_rewind_in_the_middle_of_a_living_batch_writes_nothing_after_it(
    living_universe, eager_jobs, fake_vectors, llm_server, monkeypatch
):
    from studio.saves.checkpoints import CheckpointManager

    good = scripted_pipeline_responder()
    save = save_create(universe=living_universe, name="Living run", memory_mode=MemoryMode.LIVING)

    def responder(request):
        if operation_of(request) == "extract" and "The second." in user_prompt(request):
            # a rewind to turn 1 (from another thread) lands while turn 2 waits for the model
            try:
                CheckpointManager(vector_memory=fake_vectors).rewind(Save.objects.get(pk=save.pk), 1)
            finally:
                connections.close_all()
        return good(request)

    llm_server.responder = responder
    monkeypatch.setattr("studio.memory.jobs.dispatch.send", lambda job_id, countdown=0: None)  # the turns queue up
    for text in ["The first.", "The second.", "The third."]:
        turn_append(game_save=save, player_input="", narrative=text)
    jobs.run_job(first_job(save, JobKind.EMBED_TURN).pk)

    living = statuses(save, JobKind.LIVING_TURN)
    assert living[1] == JobStatus.DONE
    assert living[2] == JobStatus.SKIPPED and living[3] == JobStatus.SKIPPED
    assert "timeline rewound" in Job.objects.get(game_save=save, kind=JobKind.LIVING_TURN, turn_id=2).progress
    assert list(
        Fact.objects.filter(game_save=save).values_list("turn_id", flat=True).order_by("turn_id").distinct()
    ) == [1]
    assert not Observation.objects.filter(game_save=save, created_turn_id__gt=1).exists()
    assert not any("The third." in p for p in extract_prompts(llm_server))


# -- the real vector store ------------------------------------------------------------------------


@pytest.mark.slow
def test_batched_embedding_on_the_real_store_then_replaced(
    game_save, eager_jobs, tmp_path, monkeypatch, django_capture_on_commit_callbacks
):
    from studio.memory.jobs import registry
    from studio.memory.vector import VectorMemory
    from studio.saves.services import turn_update_narrative

    memory = VectorMemory(str(tmp_path / "chroma"))
    monkeypatch.setattr(registry, "default_vector_memory", lambda: memory)
    try:
        texts = ["Kaël paid the harbour master.", "Mirela sold the jade ring.", "The tide rose."]
        turns = queue_turns(django_capture_on_commit_callbacks, game_save, texts)
        jobs.run_job(first_job(game_save, JobKind.EMBED_TURN).pk)
        assert {j.result.get("batch") for j in Job.objects.filter(game_save=game_save)} == {3}
        # an edit re-embeds its turn through the batch API: the old chunk is replaced
        with django_capture_on_commit_callbacks(execute=False):
            turn_update_narrative(game_save=game_save, turn_id=turns[1], narrative="Mirela kept the jade ring.")
        jobs.run_job(Job.objects.get(game_save=game_save, status=JobStatus.QUEUED).pk)
        chunks = memory.get_chunks(game_save.save_id, chunk_type="narrative")
        assert [(c["turn_id"], c["text"]) for c in chunks] == [
            (turns[0], texts[0]),
            (turns[1], "Mirela kept the jade ring."),
            (turns[2], texts[2]),
        ]
        hits = memory.query(game_save.save_id, "who kept the ring", current_turn_id=turns[2], k=1)
        assert hits and hits[0]["turn_id"] == turns[1]
    finally:
        memory.close()


def test_a_batch_checks_its_timeline_in_one_read_whatever_its_size(game_save):
    """`check_timelines`: one save lock and one read of the jobs' rows, not one per job."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from studio.memory import jobs
    from studio.memory.models import Job, JobKind

    def contexts(count):
        return [
            jobs.JobContext(
                job=Job.objects.create(
                    kind=JobKind.EMBED_TURN,
                    universe_id=game_save.universe_id,
                    game_save=game_save,
                    turn_id=1 + index % game_save.current_turn,
                    timeline_generation=game_save.timeline_generation,
                ),
                worker="test",
            )
            for index in range(count)
        ]

    counts = []
    for size in (2, 6):
        batch = contexts(size)
        with CaptureQueriesContext(connection) as queries:
            assert jobs.check_timelines(batch, game_save) == {}
        counts.append(len(queries))
    assert counts[0] == counts[1]
