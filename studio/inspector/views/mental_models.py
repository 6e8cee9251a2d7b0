"""Mental models per subject with their source beliefs, stale flags and "refresh now"."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from studio.memory.selectors import mental_model_list
from studio.memory.services import mental_models_refresh_request
from studio.saves.access import Access, save_for
from studio.saves.views.saves import save_page_context

SOURCES_SHOWN = 8


def _context(request: HttpRequest, game_save, **extra) -> dict:
    models = mental_model_list(game_save=game_save, sources_shown=SOURCES_SHOWN)
    context = save_page_context(request, game_save, "models")
    context.update(
        {
            "models": models,
            "stale_count": sum(1 for m in models if m.stale),
            # Built once: one reverse() per listed belief is measurable on a 50-model page.
            "belief_url": reverse("memory:beliefs", args=[game_save.save_id]),
        }
    )
    context.update(extra)
    return context


@require_GET
def mental_models(request: HttpRequest, save_id: str) -> HttpResponse:
    game_save = save_for(user=request.user, save_id=save_id)
    template = "memory/mental_models.html#models" if request.htmx else "memory/mental_models.html"
    return render(request, template, _context(request, game_save))


@require_POST
def mental_models_refresh(request: HttpRequest, save_id: str) -> HttpResponse:
    """Queue a refresh of the save's stale mental models (flagging one model first if named)."""
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    model_id = request.POST.get("model_id", "")
    job = mental_models_refresh_request(game_save=game_save, model_id=int(model_id) if model_id.isdigit() else None)
    note = f"Refresh queued (job {job.pk})."
    if not request.htmx:
        messages.success(request, note)
        return redirect("memory:mental_models", save_id=game_save.save_id)
    return render(request, "memory/mental_models.html#models", _context(request, game_save, note=note, job=job))
