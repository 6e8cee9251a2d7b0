"""Beliefs by subject with trend badges, and one belief's page (evidence chart, history)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from studio.inspector.charts import evidence_chart
from studio.memory.models import subject_key_for
from studio.memory.selectors import belief_get, belief_page, belief_sources, belief_subjects, source_turns
from studio.saves.access import save_for
from studio.saves.views.saves import save_page_context


@require_GET
def beliefs(request: HttpRequest, save_id: str) -> HttpResponse:
    """The save's beliefs, by subject, each with its trend at the save's current turn."""
    game_save = save_for(user=request.user, save_id=save_id)
    subject = request.GET.get("subject")
    subject_key = subject_key_for(subject) if subject is not None else None
    search = request.GET.get("q", "").strip()[:200]
    page = belief_page(
        game_save=game_save, subject_key=subject_key, search=search, page_number=request.GET.get("page", 1)
    )
    context = save_page_context(request, game_save, "beliefs")
    context.update(
        {
            "page": page,
            "subjects": belief_subjects(game_save=game_save),
            "subject_key": subject_key,
            "search": search,
        }
    )
    template = "memory/beliefs.html#belief-results" if request.htmx else "memory/beliefs.html"
    return render(request, template, context)


@require_GET
def belief_detail(request: HttpRequest, save_id: str, observation_id: int) -> HttpResponse:
    """One belief: its trend, its evidence over turns (SVG) and its history trail."""
    game_save = save_for(user=request.user, save_id=save_id)
    belief = belief_get(game_save=game_save, observation_id=observation_id)
    chart = evidence_chart(
        source_turns=source_turns(belief), history=belief.history or [], now_turn=game_save.current_turn
    )
    context = save_page_context(request, game_save, "beliefs")
    context.update(
        {
            "belief": belief,
            "trend": chart.trend,
            "chart": chart,
            "sources": belief_sources(game_save=game_save, belief=belief),
            "history": list(reversed(belief.history or [])),
        }
    )
    template = "memory/belief_detail.html#chart" if request.htmx else "memory/belief_detail.html"
    return render(request, template, context)
