"""Memory writes the inspector asks for (studio/memory/services.py)."""

from __future__ import annotations

import pytest

from studio.memory.models import Job, JobKind, JobStatus, MentalModel
from studio.memory.services import mental_models_refresh_request
from studio.world.models import Save

pytestmark = pytest.mark.django_db


def test_refresh_request_flags_the_named_model_and_queues_one_job_on_commit(
    game_save, django_capture_on_commit_callbacks
):
    named = MentalModel.objects.create(game_save=game_save, subject="Kaël", summary="x")
    untouched = MentalModel.objects.create(game_save=game_save, subject="Mira", summary="y")
    with django_capture_on_commit_callbacks() as callbacks:
        job = mental_models_refresh_request(game_save=game_save, model_id=named.pk)
    assert len(callbacks) == 1  # the job reaches the runner only once the flag is committed
    assert Job.objects.get() == job
    assert (job.kind, job.status, job.turn_id) == (JobKind.REFRESH_MODELS, JobStatus.QUEUED, game_save.current_turn)
    assert MentalModel.objects.get(pk=named.pk).stale and not MentalModel.objects.get(pk=untouched.pk).stale


def test_refresh_request_without_a_model_flags_nothing(game_save):
    model = MentalModel.objects.create(game_save=game_save, subject="Kaël", summary="x")
    mental_models_refresh_request(game_save=game_save)
    assert not MentalModel.objects.get(pk=model.pk).stale
    assert Job.objects.filter(game_save=game_save, kind=JobKind.REFRESH_MODELS).count() == 1


def test_refresh_request_never_flags_another_saves_model(game_save, universe):
    other = Save.objects.create(universe=universe, name="other")
    foreign = MentalModel.objects.create(game_save=other, subject="Kaël", summary="x")
    job = mental_models_refresh_request(game_save=game_save, model_id=foreign.pk)
    assert not MentalModel.objects.get(pk=foreign.pk).stale
    assert job.game_save_id == game_save.pk
