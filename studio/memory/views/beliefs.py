"""Beliefs by subject with trend badges, and one belief's page (evidence chart, history)."""
from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from studio.memory.charts import evidence_chart
from studio.memory.models import subject_key_for
from studio.memory.observations import compute_trend
from studio.saves.selectors import BELIEFS_PER_PAGE, belief_get, belief_list, belief_subjects, facts_by_id
from studio.saves.views.access import visible_save
from studio.saves.views.saves import save_page_context


def _source_turns(belief) -> list[int]:
    turns = []
    for source in belief.sources or []:
        try:
            turns.append(int(source.get("turn_id")))
        except (TypeError, ValueError, AttributeError):
            continue
    return turns


@require_GET
def beliefs(request: HttpRequest, save_id: str) -> HttpResponse:
    """The save's beliefs, by subject, each with its trend at the save's current turn."""
    game_save = visible_save(request, save_id)
    subject = request.GET.get("subject")
    subject_key = subject_key_for(subject) if subject is not None else None
    search = request.GET.get("q", "").strip()[:200]
    page = Paginator(belief_list(game_save=game_save, subject_key=subject_key, search=search), BELIEFS_PER_PAGE).get_page(
        request.GET.get("page", 1)
    )
    now = game_save.current_turn
    for belief in page.object_list:
        belief.trend = compute_trend(_source_turns(belief), now)
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
    game_save = visible_save(request, save_id)
    belief = belief_get(game_save=game_save, observation_id=observation_id)
    turns = _source_turns(belief)
    now = game_save.current_turn
    chart = evidence_chart(source_turns=turns, history=belief.history or [], now_turn=now)
    fact_ids = [int(s["fact_id"]) for s in belief.sources or [] if str(s.get("fact_id", "")).isdigit()]
    facts = facts_by_id(game_save=game_save, fact_ids=fact_ids)
    sources = [
        {"fact_id": s.get("fact_id"), "turn_id": s.get("turn_id"), "fact": facts.get(int(s["fact_id"])) if str(s.get("fact_id", "")).isdigit() else None}
        for s in sorted(belief.sources or [], key=lambda s: (int(s.get("turn_id") or 0), int(s.get("fact_id") or 0)))
    ]
    context = save_page_context(request, game_save, "beliefs")
    context.update(
        {
            "belief": belief,
            "trend": chart.trend,
            "chart": chart,
            "sources": sources,
            "history": list(reversed(belief.history or [])),
        }
    )
    template = "memory/belief_detail.html#chart" if request.htmx else "memory/belief_detail.html"
    return render(request, template, context)
