"""Writes the memory inspector asks for: flag a mental model stale and queue a refresh.

Invariants: a request to refresh commits its flag and its job row together (one
transaction), and the job reaches the runner only once that commits
(`studio.memory.jobs.enqueue_refresh_models` dispatches on commit). Flagging touches only
the save's own models: a model id of another save flags nothing and still queues the
save's refresh. Permission to ask is the view's check (playtesters).
"""

from __future__ import annotations

from django.db import transaction

from studio.memory.jobs import enqueue_refresh_models
from studio.memory.models import Job, MentalModel
from studio.world.models import Save


def mental_models_refresh_request(*, game_save: Save, model_id: int | None = None) -> Job:
    """Queue a refresh of the save's stale mental models, flagging model `model_id` stale first.

    The refresh job regenerates the stale models; flagging a fresh one asks for it now.
    Return the queued job.
    """
    with transaction.atomic():
        if model_id is not None:
            MentalModel.objects.filter(game_save=game_save, pk=model_id).update(stale=True)
        return enqueue_refresh_models(game_save=game_save)
