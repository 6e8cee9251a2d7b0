"""CheckpointManager.fork: a copy of a save at turn N, independent of the original."""

from __future__ import annotations

import pytest

from studio.memory import facts as F
from studio.memory import mental_models as MM
from studio.memory import observations as O
from studio.memory import timeline
from studio.memory.models import Fact as FactRow
from studio.memory.models import Job, JobKind, JobStatus, RecordedQuery
from studio.memory.models import MentalModel as MentalModelRow
from studio.memory.models import Observation as ObservationRow
from studio.saves.checkpoints import CheckpointManager, InvalidTurnError
from studio.world.models import Event, Save

from .scenario import play_turn, snapshot

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("target", [0, 1, 2, 3, 4])
def test_fork_equals_original_at_turn(story, vector, target):
    save = story["save"]
    before = snapshot(save)
    fork = CheckpointManager(vector_memory=vector).fork(save, target)
    assert snapshot(fork) == story["snaps"][target]
    assert snapshot(save) == before  # the original is untouched
    assert (fork.forked_from_id, fork.fork_turn, fork.current_turn) == (save.pk, target, target)
    assert fork.save_id != save.save_id and fork.universe_id == save.universe_id
    assert fork.memory_mode == save.memory_mode and fork.timeline_generation == 0


def test_fork_gets_new_ids_and_remapped_sources(story, vector):
    save = story["save"]
    fork = CheckpointManager(vector_memory=vector).fork(save, 4, name="  Branch  ")
    assert fork.name == "Branch"
    fork_facts = set(FactRow.objects.filter(game_save=fork).values_list("pk", flat=True))
    orig_facts = set(FactRow.objects.filter(game_save=save).values_list("pk", flat=True))
    assert fork_facts and not fork_facts & orig_facts
    fork_beliefs = set(ObservationRow.all_objects.filter(game_save=fork).values_list("pk", flat=True))
    for b in ObservationRow.all_objects.filter(game_save=fork):
        assert {s["fact_id"] for s in b.sources} <= fork_facts
        for h in b.history:
            assert {s["fact_id"] for s in h.get("sources_added", [])} <= fork_facts
    for m in MentalModelRow.objects.filter(game_save=fork):
        assert set(m.sources) <= fork_beliefs
        assert all(set(v["sources"]) <= fork_beliefs for v in m.versions)
    # Event timestamps are the original ones (the fork is a copy, not a replay).
    assert list(Event.objects.filter(game_save=fork).order_by("turn_id").values_list("created_at", flat=True)) == list(
        Event.objects.filter(game_save=save).order_by("turn_id").values_list("created_at", flat=True)
    )
    # Forking at the current turn copies the stale flags as they are (nothing to roll back).
    assert not ObservationRow.objects.filter(game_save=fork, stale=True).exists()


def test_fork_at_earlier_turn_flags_rolled_back_rows_stale(story, vector):
    fork = CheckpointManager(vector_memory=vector).fork(story["save"], 2)
    kael = MM.get_mental_models(fork.save_id, subject="Kael")[0]
    assert kael.stale and kael.summary == "Kael, a smuggler who pays his debts."
    assert {o.statement: o.stale for o in O.get_observations(fork.save_id)} == {
        "Kael repaid Mira.": True,
        "The harbour is closed.": True,
    }


def test_a_living_fork_with_stale_mental_models_queues_their_refresh_as_a_rewind_would(story, vector):
    fork_now = CheckpointManager(vector_memory=vector).fork(story["save"], 4)
    assert not Job.objects.filter(game_save=fork_now, kind=JobKind.REFRESH_MODELS).exists()  # nothing stale
    fork = CheckpointManager(vector_memory=vector).fork(story["save"], 2)
    assert MentalModelRow.objects.filter(game_save=fork, stale=True).exists()
    job = Job.objects.get(game_save=fork, kind=JobKind.REFRESH_MODELS)
    assert (job.turn_id, job.timeline_generation, job.status) == (2, fork.timeline_generation, JobStatus.QUEUED)


def test_later_changes_do_not_cross(story, vector):
    save = story["save"]
    manager = CheckpointManager(vector_memory=vector)
    fork = manager.fork(save, 2, name="Branch")
    fork_at_2 = snapshot(fork)
    # Play on the fork: the original does not move.
    original = snapshot(save)
    b1_fork = O.get_observations(fork.save_id, subject="Kael")[0].observation_id
    play_turn(
        fork,
        facts=[("Kael sinks the ship.", ["Kael"])],
        actions=[
            {
                "kind": "UPDATE",
                "observation_id": b1_fork,
                "statement": "Kael is reckless.",
                "subject": "Kael",
                "source_fact_ids": [("new", 0)],
            }
        ],
        refresh=[("Kael", "Kael the reckless.", [b1_fork])],
    )
    assert snapshot(save) == original
    # Rewind and replay the original: the fork does not move.
    fork_now = snapshot(fork)
    manager.rewind(save, 1)
    play_turn(save, facts=[("Mira leaves town.", ["Mira"])])
    assert snapshot(fork) == fork_now
    assert fork_now != fork_at_2 and F.count_facts(fork.save_id) == 4
    # Deleting the original keeps the fork (forked_from is cleared, not cascaded).
    save.delete()
    fork.refresh_from_db()
    assert fork.forked_from_id is None and snapshot(fork) == fork_now


def test_fork_copies_vectors_after_commit_and_retries(story, vector, django_capture_on_commit_callbacks):
    save = story["save"]
    manager = CheckpointManager(vector_memory=vector)
    with django_capture_on_commit_callbacks(execute=True):
        fork = manager.fork(save, 3)
    assert ("copy_save", "story", fork.save_id, 3) in vector.calls
    assert vector.turns(fork.save_id) == [1, 2, 3] and vector.turns("story") == [1, 2, 3, 4]
    assert Job.objects.get(game_save=fork, kind=JobKind.FORK_VECTORS).status == JobStatus.DONE

    vector.fail_copy = 1
    with django_capture_on_commit_callbacks(execute=True):
        broken = manager.fork(save, 2)
    job = Job.objects.get(game_save=broken, kind=JobKind.FORK_VECTORS)
    assert job.status == JobStatus.FAILED and "mid-copy" in job.error
    assert manager.finish_fork_vectors(broken) == {"done": 1, "error": ""}
    # The half-copied chunks were cleared before the retry: no duplicates.
    chunks = sorted(c["turn_id"] for c in vector.chunks if c["save_id"] == broken.save_id)
    assert chunks == [1, 2]
    assert manager.finish_fork_vectors(broken) == {"done": 0, "error": ""}


@pytest.mark.parametrize("bad", [5, -1, 1.0, "1"])
def test_fork_rejects_bad_turns(story, vector, bad):
    with pytest.raises(InvalidTurnError):
        CheckpointManager(vector_memory=vector).fork(story["save"], bad)
    assert Save.objects.count() == 1


def test_fork_keeps_tombstones_so_the_fork_can_rewind_too(story, vector):
    fork = CheckpointManager(vector_memory=vector).fork(story["save"], 3)
    assert O.count_observations(fork.save_id) == 2  # b2 was deleted at turn 3
    CheckpointManager(vector_memory=vector).rewind(fork, 2)
    assert snapshot(fork) == story["snaps"][2]


def test_one_registration_puts_a_table_in_rewind_preview_and_fork(story, vector, request):
    """A per-turn table is one registration: here recorded queries, registered as a table a
    fork carries, are counted by the preview, deleted by the rewind and copied by the fork
    without any change to the checkpoint code."""
    original = timeline.table("recorded_queries")
    timeline.register_table(
        timeline.TurnTable.plain(
            "recorded_queries", RecordedQuery, order=60, section="recorded_queries", label="Recorded queries"
        ),
        replace=True,
    )
    request.addfinalizer(lambda: timeline.register_table(original, replace=True))
    save = story["save"]
    RecordedQuery.objects.create(game_save=save, turn_id=2, query_text="harbour")  # turn 4 has "ship"
    manager = CheckpointManager(vector_memory=vector)

    fork = manager.fork(save, 3)
    assert list(RecordedQuery.objects.filter(game_save=fork).values_list("turn_id", "query_text")) == [(2, "harbour")]
    assert manager.preview(save, 3).counts["recorded_queries"] == 1
    assert manager.rewind(save, 3).counts["recorded_queries"] == 1
    assert list(RecordedQuery.objects.filter(game_save=save).values_list("turn_id", flat=True)) == [2]
