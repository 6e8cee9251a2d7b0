"""Facts browser: filter by turn range, entity and type, search statements."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from studio.memory.selectors import FACTS_PER_PAGE, fact_list, fact_types
from studio.saves.access import save_for
from studio.saves.views.saves import save_page_context


def _int_or_none(value: str | None) -> int | None:
    value = (value or "").strip()
    return int(value) if value.isdigit() else None


@require_GET
def facts(request: HttpRequest, save_id: str) -> HttpResponse:
    game_save = save_for(user=request.user, save_id=save_id)
    filters = {
        "turn_from": _int_or_none(request.GET.get("turn_from")),
        "turn_to": _int_or_none(request.GET.get("turn_to")),
        "entity": request.GET.get("entity", "").strip()[:200],
        "fact_type": request.GET.get("type", "").strip()[:40],
        "search": request.GET.get("q", "").strip()[:200],
    }
    page = Paginator(fact_list(game_save=game_save, **filters), FACTS_PER_PAGE).get_page(request.GET.get("page", 1))
    context = save_page_context(request, game_save, "facts")
    context.update({"page": page, "filters": filters, "fact_types": fact_types(game_save=game_save)})
    template = "memory/facts.html#fact-results" if request.htmx else "memory/facts.html"
    return render(request, template, context)
