"""An embedding of a dropped turn never stays in the store as the turn that reuses its number.

The race (issue 19, item 1 of the review): the old turn's embedding job passes its first
timeline check and starts encoding; the save is rewound before that turn and a new turn with
the same number appended; the old job's write lands (the vector store is outside the
transaction) and replaces the new turn's chunks with the dropped narrative. The job's second
check sees the rewind and must leave the store holding only the live turn's narrative, even
though the live turn's own embedding job has not run (or already ran). The rewind and append
are done by a hook in the fake store between the job's encode and its write.
"""

from __future__ import annotations

import pytest

from studio.memory import jobs
from studio.memory.models import Job, JobKind, JobStatus
from studio.saves.checkpoints import CheckpointManager
from studio.world.models import Save
from studio.saves.services import turn_append

pytestmark = pytest.mark.django_db

NEW_4 = "Kaël buys a new lantern from the harbour master at dawn."


def append(capture, save, text):
    """Append a turn; its jobs wait (as behind a busy worker)."""
    with capture(execute=False):
        return turn_append(game_save=Save.objects.get(pk=save.pk), player_input="go", narrative=text)


def held(save, turn):
    """Keep the turn's latest embedding job from the runner draining the queue (paused)."""
    Job.objects.filter(pk=embed_job(save, turn).last().pk).update(status=JobStatus.PAUSED)


def rewind_and_append_before_the_write(vectors, method, save, capture):
    """Make the store's `method` rewind the save to 3 and append a new turn 4 before writing, once."""
    original = getattr(vectors, method)
    fired = []

    def racing(*args, **kwargs):
        if not fired:
            fired.append(True)
            with capture(execute=False):
                CheckpointManager(vector_memory=vectors).rewind(Save.objects.get(pk=save.pk), 3)
            append(capture, save, NEW_4)
            held(save, 4)  # the live turn's own job waits: the store must not hold the dropped text meanwhile
        return original(*args, **kwargs)

    setattr(vectors, method, racing)
    return fired


def embed_job(save, turn):
    return Job.objects.filter(game_save=save, kind=JobKind.EMBED_TURN, turn_id=turn).order_by("pk")


@pytest.mark.parametrize(
    ("narratives", "method"),
    [(["Four."], "update_turn_narrative"), (["Four.", "Five."], "update_turn_narratives")],
    ids=["one job", "a batch"],
)
def test_a_dropped_turn_embedding_does_not_replace_the_new_turn_of_the_same_number(
    game_save, fake_vectors, django_capture_on_commit_callbacks, narratives, method
):
    for text in narratives:
        append(django_capture_on_commit_callbacks, game_save, text)
    old = embed_job(game_save, 4).get()
    fired = rewind_and_append_before_the_write(fake_vectors, method, game_save, django_capture_on_commit_callbacks)

    jobs.run_job(old.pk)

    assert fired
    assert fake_vectors.texts(game_save.save_id) == {4: [NEW_4]}
    old.refresh_from_db()
    assert old.status == JobStatus.SKIPPED and "embedded again" in old.progress
    new = embed_job(game_save, 4).last()
    assert new.pk != old.pk and new.status == JobStatus.PAUSED  # the live turn's own job has not run
    assert fake_vectors.texts(game_save.save_id) == {4: [NEW_4]}
    hits = fake_vectors.query(game_save.save_id, "lantern", k=10, current_turn_id=4)
    assert [hit["text"] for hit in hits] == [NEW_4]

    Job.objects.filter(pk=new.pk).update(status=JobStatus.QUEUED)
    jobs.run_job(new.pk)  # and the live turn's job, when it runs, replaces rather than duplicates
    assert fake_vectors.texts(game_save.save_id) == {4: [NEW_4]}


def test_a_dropped_turn_embedding_landing_after_the_new_turn_was_embedded_is_undone(
    game_save, fake_vectors, django_capture_on_commit_callbacks
):
    """The new turn 4's job, on another worker, embeds it and ends done before the old write
    lands: nothing would ever replace the dropped narrative again."""
    append(django_capture_on_commit_callbacks, game_save, "Four.")
    old = embed_job(game_save, 4).get()
    original = fake_vectors.update_turn_narrative
    fired = []

    def racing(save_id, turn_id, text, *args, **kwargs):
        if not fired:
            fired.append(True)
            with django_capture_on_commit_callbacks(execute=False):
                CheckpointManager(vector_memory=fake_vectors).rewind(Save.objects.get(pk=game_save.pk), 3)
            append(django_capture_on_commit_callbacks, game_save, NEW_4)
            original(save_id, 4, NEW_4)  # the other worker's write, then its job ends done
            Job.objects.filter(pk=embed_job(game_save, 4).last().pk).update(status=JobStatus.DONE)
        return original(save_id, turn_id, text, *args, **kwargs)

    fake_vectors.update_turn_narrative = racing
    jobs.run_job(old.pk)

    assert fired and Job.objects.get(pk=old.pk).status == JobStatus.SKIPPED
    assert fake_vectors.texts(game_save.save_id) == {4: [NEW_4]}
