"""Lore Book tools: the key tester and the health tab (both read only).

Both work without JavaScript (a full page); with htmx the tester re-evaluates as the author
types (debounced) and the health report reloads in place, each answering with its
template's named fragment. The tester's form POSTs its text (up to 20,000 characters do
not fit in a URL); it writes nothing, so a POST answers with the page, not a redirect. A GET
with `?text=` still works for a short text in a link.
"""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_http_methods

from studio.universes.lore_health import DEFAULT_SHARE, lore_health
from studio.universes.lore_tester import MAX_TEXT_CHARS, lore_key_test
from studio.universes.access import universe_for
from studio.universes.views.common import universe_context

MAX_REPLAY_SAVES = 50


def _saves(universe):
    return list(
        universe.saves.order_by("-last_activity_at").only(
            "save_id", "name", "current_turn", "timeline_generation", "forked_from_id", "universe_id"
        )
    )


def _pick_save(saves, save_id: str):
    if not save_id:
        return None
    for save in saves:
        if save.save_id == save_id:
            return save
    raise Http404("No such save in this universe.")


def _int(value, default=None, low=None, high=None):
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        return default
    if low is not None:
        number = max(low, number)
    if high is not None:
        number = min(high, number)
    return number


@require_http_methods(["GET", "POST"])
def lore_tester(request: HttpRequest, slug: str) -> HttpResponse:
    universe = universe_for(user=request.user, slug=slug)
    saves = _saves(universe)
    data = request.POST if request.method == "POST" else request.GET
    text = data.get("text", "")[:MAX_TEXT_CHARS]
    save = _pick_save(saves, data.get("save", ""))
    turn = _int(data.get("turn"), low=1)
    show_all = data.get("all") == "1"
    result = (
        lore_key_test(universe=universe, text=text, save=save, turn=turn, show_all=show_all) if text.strip() else None
    )
    context = {
        **universe_context(request, universe, "lore"),
        "lore_tab": "tester",
        "saves": saves,
        "text": text,
        "save": save,
        "turn": turn,
        "show_all": show_all,
        "result": result,
        "max_chars": MAX_TEXT_CHARS,
    }
    template = "universes/lore_tester.html#result" if request.htmx else "universes/lore_tester.html"
    return render(request, template, context)


@require_GET
def lore_health_page(request: HttpRequest, slug: str) -> HttpResponse:
    universe = universe_for(user=request.user, slug=slug)
    saves = _saves(universe)
    scope = request.GET.get("save", saves[0].save_id if saves else "")
    share = _int(request.GET.get("share"), DEFAULT_SHARE, low=1, high=100)
    if scope == "all":
        chosen = saves[:MAX_REPLAY_SAVES]
    else:
        chosen = [save] if (save := _pick_save(saves, scope)) else []
    report = lore_health(universe=universe, saves=chosen, share=share)
    # Who knows what (studio.memory.knowledge): per chosen save at its current turn.
    from studio.memory.knowledge.selectors import knowledge_flags

    from studio.memory.continuity.selectors import findings_standing

    knowledge = [
        {"save": s, **knowledge_flags(s, turn=s.current_turn), "findings": list(findings_standing(game_save=s))}
        for s in chosen
    ]
    context = {
        **universe_context(request, universe, "lore"),
        "lore_tab": "health",
        "saves": saves,
        "knowledge": knowledge,
        "scope": scope,
        "report": report,
        "share": share,
        "max_saves": MAX_REPLAY_SAVES,
        "capped": scope == "all" and len(saves) > MAX_REPLAY_SAVES,
    }
    template = "universes/lore_health.html#report" if request.htmx else "universes/lore_health.html"
    return render(request, template, context)
