"""Replay after a lore change: recorded queries of recent turns run again, before vs after."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.db.models import Count, Max
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from studio.memory.recall.replay import DEFAULT_TURNS, lore_sync_pending, recorded_queries_for, replay_recorded_queries
from studio.saves.access import save_for
from studio.saves.views.saves import save_page_context
from studio.world.models import Save
from studio.universes.models import LoreRevision
from studio.universes.selectors import universe_list_for_user


@require_GET
def replay(request: HttpRequest, save_id: str) -> HttpResponse:
    game_save = save_for(user=request.user, save_id=save_id)
    turns_param = request.GET.get("turns", "")
    turns = max(1, min(int(turns_param), 1000)) if turns_param.isdigit() else DEFAULT_TURNS
    report = replay_recorded_queries(game_save=game_save, turns=turns) if request.GET.get("run") else None
    # A run has read the recorded queries and the sync flag already (same order, same filter).
    recorded = (
        [q.recorded for q in report.queries] if report else list(recorded_queries_for(game_save=game_save, turns=turns))
    )
    sync_pending = report.lore_sync_pending if report else lore_sync_pending(game_save=game_save)
    oldest = min((r.created_at for r in recorded), default=None)
    revisions = LoreRevision.objects.filter(universe_id=game_save.universe_id).select_related("author")
    if oldest is not None:
        revisions = revisions.filter(created_at__gte=oldest)
    context = save_page_context(request, game_save, "replay")
    context.update(
        {
            "turns": turns,
            "recorded": recorded,
            "report": report,
            "revisions": revisions[:20],
            "sync_pending": sync_pending,
        }
    )
    template = "memory/replay.html#replay-result" if request.htmx else "memory/replay.html"
    return render(request, template, context)


@require_GET
def universe_replay(request: HttpRequest, slug: str) -> HttpResponse:
    """Where an author lands after a lore edit: the universe's saves with recorded play to replay."""
    universe = get_object_or_404(universe_list_for_user(user=request.user), slug=slug)
    saves = (
        Save.objects.filter(universe=universe)
        .annotate(recorded=Count("recorded_queries"), last_recorded=Max("recorded_queries__created_at"))
        .order_by("-last_activity_at", "-id")
    )
    revisions = LoreRevision.objects.filter(universe=universe).select_related("author")[:20]
    return render(
        request, "memory/universe_replay.html", {"universe": universe, "saves": saves, "revisions": revisions}
    )
