"""Reads of the job ledger for pages and the API."""

from __future__ import annotations

from django.db.models import QuerySet

from studio.memory.models import Job, JobStatus


def jobs_for_save(*, game_save) -> QuerySet[Job]:
    """Return a save's jobs, newest first."""
    return Job.objects.filter(game_save=game_save).order_by("-created_at", "-id")


def jobs_active_for_save(*, game_save) -> bool:
    """True while a job of the save is queued or running (the Jobs page keeps polling)."""
    return Job.objects.filter(game_save=game_save, status__in=(JobStatus.QUEUED, JobStatus.RUNNING)).exists()
