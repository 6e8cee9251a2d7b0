"""CheckpointManager.rewind and preview: one transaction, rollback rules, vector delete after commit."""

from __future__ import annotations

import dataclasses

import pytest

from studio.memory import facts as F
from studio.memory import timeline
from studio.memory import mental_models as MM
from studio.memory.models import Job, JobKind, JobStatus
from studio.memory.models import Observation as ObservationRow
from studio.saves.checkpoints import CheckpointManager, InvalidTurnError, RewindError
from studio.world.models import Event, Save

from .scenario import play_turn, snapshot

pytestmark = pytest.mark.django_db


def test_rewind_deletes_later_rows_and_restores_beliefs_and_models(story, vector, django_capture_on_commit_callbacks):
    save = story["save"]
    manager = CheckpointManager(vector_memory=vector)
    with django_capture_on_commit_callbacks(execute=True):
        result = manager.rewind(save, 2)
    assert result.changed and (result.from_turn, result.target_turn) == (4, 2)
    assert result.counts == {
        "events": 2,
        "states": 2,
        "facts": 2,
        "beliefs_deleted": 1,
        "beliefs_updated": 2,
        "mental_models_deleted": 1,
        "mental_models_updated": 1,
        "recorded_queries": 1,
        "lore_activations": 0,
        "chapters": 0,
        "narrator_snapshots": 0,
        "vector_chunks": None,
        "presence": 0,
        "reveals": 0,
        "continuity_findings": 0,
        "memory_test_results": 0,
    }
    save.refresh_from_db()
    assert save.current_turn == 2 and save.timeline_generation == 1
    assert snapshot(save) == story["snaps"][2]
    b1 = ObservationRow.objects.get(pk=story["b1"])
    assert (b1.statement, b1.subject, b1.stale, b1.updated_turn_id) == ("Kael repaid Mira.", "Kael", True, 2)
    assert [h["turn_id"] for h in b1.history] == [1, 2]
    b2 = ObservationRow.objects.get(pk=story["b2"])  # the DELETE at turn 3 is undone
    assert b2.statement == "The harbour is closed." and b2.stale
    kael = MM.get_mental_models("story", subject="kael")[0]
    assert kael.summary == "Kael, a smuggler who pays his debts." and kael.stale and kael.updated_turn_id == 2
    assert MM.get_mental_models("story", subject="Mira") == []
    assert MM.stale_subjects("story") == ["Kael"]
    # After commit: the vector chunks after turn 2 are gone and the job is done.
    assert vector.calls == [("rollback", "story", 2)]
    assert vector.turns("story") == [1, 2]
    job = Job.objects.get(kind=JobKind.VECTOR_ROLLBACK, game_save=save)
    assert job.status == JobStatus.DONE and job.turn_id == 2 and job.result["deleted"] == 2
    assert job.timeline_generation == 1


@pytest.mark.parametrize("target", [0, 1, 2, 3])
def test_rewind_equals_recorded_state(story, vector, target):
    save = story["save"]
    CheckpointManager(vector_memory=vector).rewind(save, target)
    assert snapshot(save) == story["snaps"][target]
    assert save.current_turn == target  # the instance passed in is updated in place


def test_successive_rewinds(story, vector):
    save = story["save"]
    manager = CheckpointManager(vector_memory=vector)
    manager.rewind(save, 3)
    assert snapshot(save) == story["snaps"][3]
    manager.rewind(save, 1)
    assert snapshot(save) == story["snaps"][1]
    assert Save.objects.get(pk=save.pk).timeline_generation == 2


def test_rewind_to_current_or_later_is_a_noop(story, vector):
    save = story["save"]
    before = snapshot(save)
    for target in (4, 9):
        result = CheckpointManager(vector_memory=vector).rewind(save, target)
        assert not result.changed and result.counts == {}
        assert "Nothing to rewind" in result.message and "turn 4" in result.message
    assert snapshot(save) == before
    save.refresh_from_db()
    assert save.timeline_generation == 0
    assert not Job.objects.filter(game_save=save).exists() and vector.calls == []


@pytest.mark.parametrize("bad", [-1, 1.5, "2", None, True, 2.0])
def test_rewind_rejects_bad_turns(story, vector, bad):
    with pytest.raises(InvalidTurnError) as info:
        CheckpointManager(vector_memory=vector).rewind(story["save"], bad)
    assert isinstance(info.value, ValueError) and isinstance(info.value, RewindError)
    assert "turn" in str(info.value)
    with pytest.raises(InvalidTurnError):
        CheckpointManager(vector_memory=vector).preview(story["save"], bad)
    assert snapshot(story["save"]) == story["snaps"][4]


@pytest.fixture
def failing_table(request):
    """Make the rollback of one registered timeline table raise; restored after the test."""

    def fail(name: str, explode) -> None:
        original = timeline.table(name)
        timeline.register_table(dataclasses.replace(original, rollback=explode), replace=True)
        request.addfinalizer(lambda: timeline.register_table(original, replace=True))

    return fail


# Every per-turn table's rollback (facts, beliefs and mental models among them), then the job.
@pytest.mark.parametrize("step", [t.name for t in timeline.registered_tables()] + ["job_record"])
def test_fault_mid_rewind_leaves_save_unchanged(story, vector, monkeypatch, failing_table, step):
    save = story["save"]
    before = snapshot(save)

    def explode(*args, **kwargs):
        raise RuntimeError("disk full")

    # Each step fails after the earlier ones already changed rows in the transaction
    # (the last one after the save's turn and generation were updated).
    if step == "job_record":
        monkeypatch.setattr(Job.objects, "create", explode)
    else:
        failing_table(step, explode)
    with pytest.raises(RuntimeError, match="disk full"):
        CheckpointManager(vector_memory=vector).rewind(save, 1)
    assert snapshot(save) == before
    fresh = Save.objects.get(pk=save.pk)
    assert (fresh.current_turn, fresh.timeline_generation) == (4, 0)
    assert ObservationRow.objects.get(pk=story["b1"]).stale is False
    assert not Job.objects.filter(game_save=save).exists()
    assert vector.calls == [] and vector.turns("story") == [1, 2, 3, 4]


def test_vector_failure_keeps_db_rewind_and_hides_chunks_until_retry(story, vector, django_capture_on_commit_callbacks):
    save = story["save"]
    vector.fail_rollback = 2
    manager = CheckpointManager(vector_memory=vector)
    with django_capture_on_commit_callbacks(execute=True):
        manager.rewind(save, 1)
    save.refresh_from_db()
    assert save.current_turn == 1 and snapshot(save) == story["snaps"][1]
    job = Job.objects.get(kind=JobKind.VECTOR_ROLLBACK, game_save=save)
    assert job.status == JobStatus.FAILED and "unreachable" in job.error
    assert manager.has_pending_vector_rollback(save)
    # The later chunks are still stored, but a query at the save's horizon never sees them.
    assert vector.turns("story") == [1, 2, 3, 4]
    assert vector.query("story", "turn of story.", k=10, max_turn_id=save.current_turn)
    assert all(hit["turn_id"] <= 1 for hit in vector.query("story", "turn story.", k=10, max_turn_id=save.current_turn))
    # First retry fails again and says so; the second completes.
    assert manager.finish_vector_rollback(save) == {
        "done": 0,
        "failed": 1,
        "error": "VectorStoreDown: vector store unreachable",
    }
    assert manager.finish_vector_rollback(save) == {"done": 1, "failed": 0, "error": ""}
    assert vector.turns("story") == [1]
    assert not manager.has_pending_vector_rollback(save)
    job.refresh_from_db()
    assert job.status == JobStatus.DONE and job.attempts == 3
    assert manager.finish_vector_rollback(save) == {"done": 0, "failed": 0, "error": ""}


def test_retry_after_new_turns_reembeds_replayed_narratives(story, vector, django_capture_on_commit_callbacks):
    save = story["save"]
    vector.fail_rollback = 1
    manager = CheckpointManager(vector_memory=vector)
    with django_capture_on_commit_callbacks(execute=True):
        manager.rewind(save, 1)
    save.refresh_from_db()
    play_turn(save, narrative="A new turn two.")  # the caller forgot to finish the delete first
    with django_capture_on_commit_callbacks(execute=True):
        assert manager.finish_vector_rollback(save)["done"] == 1
    texts = sorted((c["turn_id"], c["text"]) for c in vector.chunks if c["save_id"] == "story")
    assert texts == [(1, "Turn 1 of story."), (2, "A new turn two.")]


def test_a_later_successful_rewind_covers_an_earlier_failed_one(story, vector, django_capture_on_commit_callbacks):
    save = story["save"]
    vector.fail_rollback = 1
    manager = CheckpointManager(vector_memory=vector)
    with django_capture_on_commit_callbacks(execute=True):
        manager.rewind(save, 3)
    with django_capture_on_commit_callbacks(execute=True):
        manager.rewind(save, 2)
    assert not manager.has_pending_vector_rollback(save)
    assert vector.turns("story") == [1, 2]


def test_missing_vector_module_is_recorded_not_raised(story, monkeypatch, django_capture_on_commit_callbacks):
    save = story["save"]
    manager = CheckpointManager()
    monkeypatch.setattr(
        CheckpointManager, "vector_memory", property(lambda self: (_ for _ in ()).throw(ImportError("no vector")))
    )
    with django_capture_on_commit_callbacks(execute=True):
        result = manager.rewind(save, 2)
    assert result.changed and Save.objects.get(pk=save.pk).current_turn == 2
    assert Job.objects.get(game_save=save, kind=JobKind.VECTOR_ROLLBACK).status == JobStatus.FAILED


def test_rewind_reports_vector_pending_inside_an_outer_transaction(story, vector):
    # The test runs inside a transaction: the delete waits for the outer commit.
    result = CheckpointManager(vector_memory=vector).rewind(story["save"], 2)
    assert result.vector_pending and result.counts["vector_chunks"] is None
    assert "when the transaction commits" in result.message
    assert vector.calls == []


def test_preview_lists_changes_without_changing_anything(story, vector):
    save = story["save"]
    before = snapshot(save)
    preview = CheckpointManager(vector_memory=vector).preview(save, 2)
    assert snapshot(save) == before and Save.objects.get(pk=save.pk).timeline_generation == 0
    assert preview.changed and (preview.from_turn, preview.target_turn) == (4, 2)
    assert preview.counts == {
        "events": 2,
        "states": 2,
        "facts": 2,
        "beliefs_deleted": 1,
        "beliefs_updated": 2,
        "mental_models_deleted": 1,
        "mental_models_updated": 1,
        "recorded_queries": 1,
        "lore_activations": 0,
        "chapters": 0,
        "narrator_snapshots": 0,
        "presence": 0,
        "reveals": 0,
        "continuity_findings": 0,
        "memory_test_results": 0,
    }
    assert [b.statement for b in preview.beliefs_deleted] == ["Mira trusts Kael."]
    changed = {c.before.observation_id: c for c in preview.beliefs_changed}
    assert changed[story["b1"]].before.statement == "Captain Kael owns a ship."
    assert changed[story["b1"]].after.statement == "Kael repaid Mira."
    assert changed[story["b1"]].after.subject == "Kael" and changed[story["b1"]].after.stale
    assert changed[story["b2"]].restored and not changed[story["b1"]].restored
    assert [m.subject for m in preview.mental_models_deleted] == ["Mira"]
    (kael,) = preview.mental_models_changed
    assert (kael.before.summary, kael.after.summary) == (
        "Captain Kael, shipowner.",
        "Kael, a smuggler who pays his debts.",
    )
    assert "2 turns" in preview.message
    # The preview agrees with what the rewind then does.
    result = CheckpointManager(vector_memory=vector).rewind(save, 2)
    assert {k: v for k, v in result.counts.items() if k != "vector_chunks"} == preview.counts


def test_preview_noop(story, vector):
    preview = CheckpointManager(vector_memory=vector).preview(story["save"], 4)
    assert not preview.changed and preview.counts == {} and "Nothing to rewind" in preview.message


def test_rewind_leaves_other_saves_alone(story, world, vector):
    other = Save.objects.create(universe=world, name="Other", save_id="other")
    for _ in range(3):
        play_turn(other, facts=[("Other fact.", [])], vector=vector)
    before = snapshot(other)
    CheckpointManager(vector_memory=vector).rewind(story["save"], 0)
    assert snapshot(other) == before
    assert F.count_facts("story") == 0 and F.count_facts("other") == 3


# -- with the real VectorMemory on an embedded Chroma store --------------------------------


@pytest.fixture
def real_vector(db, tmp_path):
    pytest.importorskip("chromadb")
    from studio.memory.vector import VectorMemory
    from tests.fakes import HashingEmbedder

    memory = VectorMemory(str(tmp_path / "chroma"), embedder=HashingEmbedder())
    yield memory
    memory.close()


def test_real_store_failed_delete_hides_later_chunks_and_retry_completes(
    world, real_vector, monkeypatch, django_capture_on_commit_callbacks
):
    save = Save.objects.create(universe=world, name="Real", save_id="real", memory_mode="living")
    for turn in range(1, 6):
        play_turn(save, narrative=f"The lighthouse keeper logs storm number {turn}.", vector=real_vector)
    assert real_vector.count("real") == 5
    original = real_vector._delete_ids
    calls = {"n": 0}

    def flaky(*args, **kwargs):  # VectorMemory._delete_ids(scope_id, ids)
        calls["n"] += 1
        if calls["n"] == 1:
            raise ConnectionError("chroma went away")
        return original(*args, **kwargs)

    monkeypatch.setattr(real_vector, "_delete_ids", flaky)
    manager = CheckpointManager(vector_memory=real_vector)
    with django_capture_on_commit_callbacks(execute=True):
        manager.rewind(save, 2)
    save.refresh_from_db()
    assert save.current_turn == 2 and Event.objects.filter(game_save=save).count() == 2
    assert real_vector.count("real") == 5  # the delete failed: later chunks still stored
    hits = real_vector.query(
        "real", "lighthouse keeper storm", k=10, current_turn_id=save.current_turn, max_turn_id=save.current_turn
    )
    assert hits and {h["turn_id"] for h in hits} <= {1, 2}
    assert manager.finish_vector_rollback(save)["done"] == 1
    assert real_vector.count("real") == 2
    assert [c["turn_id"] for c in real_vector.get_chunks("real")] == [1, 2]


def test_real_store_fork_copies_chunks_up_to_the_turn(world, real_vector, django_capture_on_commit_callbacks):
    save = Save.objects.create(universe=world, name="Real", save_id="real2")
    for turn in range(1, 5):
        play_turn(save, narrative=f"Turn {turn}: the tide turns.", vector=real_vector)
    manager = CheckpointManager(vector_memory=real_vector)
    with django_capture_on_commit_callbacks(execute=True):
        fork = manager.fork(save, 3)
    assert [c["turn_id"] for c in real_vector.get_chunks(fork.save_id)] == [1, 2, 3]
    assert real_vector.count("real2") == 4
    with django_capture_on_commit_callbacks(execute=True):
        manager.rewind(fork, 1)
    assert [c["turn_id"] for c in real_vector.get_chunks(fork.save_id)] == [1]
    assert real_vector.count("real2") == 4  # the original's chunks are untouched


def test_rewinding_a_living_save_queues_a_refresh_of_its_stale_models(
    story, vector, django_capture_on_commit_callbacks
):
    save = story["save"]
    with django_capture_on_commit_callbacks(execute=False):
        result = CheckpointManager(vector_memory=vector).rewind(save, 1)
    assert result.counts["mental_models_updated"] == 1
    job = Job.objects.get(kind=JobKind.REFRESH_MODELS, game_save=save)
    # Queued under the new timeline, at the rewound turn.
    assert job.timeline_generation == save.timeline_generation and job.turn_id == 1
