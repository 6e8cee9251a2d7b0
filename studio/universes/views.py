"""Universe pages."""
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from studio.universes.selectors import universe_list_for_user


@require_GET
def universe_list(request: HttpRequest) -> HttpResponse:
    universes = universe_list_for_user(user=request.user)
    return render(request, "universes/list.html", {"universes": universes})


@require_GET
def universe_detail(request: HttpRequest, slug: str) -> HttpResponse:
    universe = get_object_or_404(universe_list_for_user(user=request.user), slug=slug)
    return render(
        request,
        "universes/detail.html",
        {
            "universe": universe,
            "meta": universe.meta.all(),
            "lore": universe.lore_entries.all(),
            "saves": universe.saves.all(),
        },
    )


@require_GET
def lore_detail(request: HttpRequest, slug: str, entry_id: str) -> HttpResponse:
    universe = get_object_or_404(universe_list_for_user(user=request.user), slug=slug)
    entry = get_object_or_404(universe.lore_entries.prefetch_related("links", "backlinks"), entry_id=entry_id)
    return render(request, "universes/lore_detail.html", {"universe": universe, "entry": entry})
