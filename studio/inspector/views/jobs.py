"""A save's background jobs: live status (htmx polling that stops when idle) and retry; what the spend guards count."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseStopPolling

from studio.memory import selectors
from studio.memory.jobs import (
    RETRYABLE_STATUSES,
    JobNotRetryable,
    job_retry,
    jobs_dropped_by_rewind,
    jobs_retry_skipped,
)
from studio.memory.llm import spend_status, user_spend_status
from studio.memory.models import JobStatus, LLMCall
from studio.memory.reflect import MIN_BELIEFS
from studio.saves.access import Access, save_for
from studio.saves.views.saves import save_page_context

JOBS_SHOWN = 50
# What a living job's layer needs before it forms anything (shown on the job's page).
LAYER_HINTS = {
    "living_turn": "Extraction turns the turn's narrative into facts; consolidation forms beliefs from them; a "
    f"mental model forms for a subject once it has at least {MIN_BELIEFS} beliefs. A model answer that is not the "
    "JSON asked for (see the answers below) keeps nothing.",
    "refresh_models": f"A mental model is written for each subject with at least {MIN_BELIEFS} beliefs; with fewer, "
    "none is.",
}


def _context(request: HttpRequest, game_save, **extra) -> dict:
    context = save_page_context(request, game_save, "jobs")
    jobs = list(selectors.job_list(game_save=game_save)[:JOBS_SHOWN])
    # Jobs of turns a rewind dropped: shown as abandoned, not as the Done they did on them.
    dropped = jobs_dropped_by_rewind(jobs, game_save)
    for job in jobs:
        job.abandoned = dropped.get(job.pk, "")
    context.update(
        {
            "jobs": jobs,
            "active": selectors.jobs_active(game_save=game_save),
            "retryable": RETRYABLE_STATUSES,
            "has_skipped": selectors.jobs_skipped_memory(game_save=game_save),
        }
    )
    context.update(extra)
    return context


def _fragment(request: HttpRequest, game_save, **extra) -> HttpResponse:
    """The #jobs fragment; once nothing is queued or running, htmx is told to stop polling."""
    context = _context(request, game_save, **extra)
    response_class = HttpResponse if context["active"] else HttpResponseStopPolling
    return response_class(render_to_string("memory/jobs.html#jobs", context, request=request))


CALLS_SHOWN = 20


def _spending(request: HttpRequest, game_save) -> dict:
    """What the spend guards count: this save's last hour, the viewer's last 24 hours, and the calls made
    outside jobs (the memory proxy's relays, the narrator), refusals included."""
    return {
        "save_spend": spend_status(game_save_id=game_save.pk),
        "user_spend": user_spend_status(user_id=request.user.pk),
        "request_calls": list(
            LLMCall.objects.filter(game_save=game_save, job__isnull=True)
            .select_related("user")
            .order_by("-created_at", "-id")[:CALLS_SHOWN]
        ),
    }


@require_GET
def save_jobs(request: HttpRequest, save_id: str) -> HttpResponse:
    game_save = save_for(user=request.user, save_id=save_id)
    if request.htmx:
        return _fragment(request, game_save)
    return render(request, "memory/jobs.html", _context(request, game_save, **_spending(request, game_save)))


@require_GET
def save_job_detail(request: HttpRequest, save_id: str, job_id: int) -> HttpResponse:
    """One job: its step and time, and each LLM call's request and answer (playtesters)."""
    game_save = save_for(user=request.user, save_id=save_id)
    job = selectors.job_get(game_save=game_save, job_id=job_id)
    if job is None:
        raise Http404("No such job.")
    context = save_page_context(request, game_save, "jobs")
    context.update(
        {
            "job": job,
            "llm_calls": list(LLMCall.objects.filter(job=job).order_by("created_at", "id")),
            "layer_hint": LAYER_HINTS.get(job.kind, ""),
        }
    )
    return render(request, "memory/job.html", context)


@require_POST
def save_job_retry(request: HttpRequest, save_id: str, job_id: int) -> HttpResponse:
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    job = selectors.job_get(game_save=game_save, job_id=job_id)
    if job is None:
        raise Http404("No such job.")
    try:
        job = job_retry(job=job)
    except JobNotRetryable as exc:
        if exc.reason:
            note = str(exc)
        else:
            note = f"Job {job.pk} is {exc.job.get_status_display().lower()}; nothing to retry."
    else:
        if job.status in (JobStatus.QUEUED, JobStatus.RUNNING):
            note = f"Job {job.pk} queued again."
        else:  # a rewind's vector delete or a fork's vector copy runs at once
            note = f"Job {job.pk} ran again: {job.get_status_display().lower()}."
    if not request.htmx:
        messages.info(request, note)
        return redirect("memory:jobs", save_id=game_save.save_id)
    # Answer 200 (not "stop polling") even when the retried job already ended (a rewind's
    # vector delete runs at once): the fragment carries its outcome.
    return render(request, "memory/jobs.html#jobs", _context(request, game_save, note=note))


@require_POST
def save_jobs_retry_skipped(request: HttpRequest, save_id: str) -> HttpResponse:
    """Retry the save's skipped memory jobs whose turns are still on its live timeline."""
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    counts = jobs_retry_skipped(game_save=game_save)
    note = f"Recovered {counts['recovered']} skipped memory job{'s' if counts['recovered'] != 1 else ''}"
    if counts["left"]:
        note += f"; {counts['left']} left skipped (their turns were dropped by a rewind or replaced)"
    note += "."
    if not request.htmx:
        messages.info(request, note)
        return redirect("memory:jobs", save_id=game_save.save_id)
    return render(request, "memory/jobs.html#jobs", _context(request, game_save, note=note))
