"""Who knows what: a save's characters against its facts and secrets at turn N, a character's
knowledge timeline, and the edits (presence at a turn, reveals added or removed).

Every read goes through `studio.memory.knowledge.selectors` (derived from the rows up to N,
so the page at N after a rewind shows what it showed at N before); every write through the
knowledge services, which check the turn and the names. Reading needs the save; editing
needs the Playtester role (`Access.PLAY`).
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from studio.memory.knowledge.models import Reveal
from studio.memory.knowledge.presence import presence_set
from studio.memory.knowledge.reveals import reveal_add, reveal_delete
from studio.memory.knowledge.selectors import character_timeline, knowledge_at
from studio.saves.access import Access, save_for
from studio.saves.views.saves import save_page_context


def _turn(request: HttpRequest, game_save) -> int:
    value = (request.GET.get("turn") or "").strip()
    turn = int(value) if value.isdigit() else game_save.current_turn
    return max(0, min(turn, game_save.current_turn))


def _with_titles(game_save, reveals) -> list:
    """The reveals with `entry_title`: a lore reveal is shown by its entry's title (one query for the page)."""
    reveals = list(reveals)
    ids = {r.entry_id for r in reveals if r.entry_id}
    titles = (
        dict(game_save.universe.lore_entries.filter(entry_id__in=ids).values_list("entry_id", "title")) if ids else {}
    )
    for reveal in reveals:
        reveal.entry_title = titles.get(reveal.entry_id, "")
    return reveals


@require_GET
def knowledge(request: HttpRequest, save_id: str) -> HttpResponse:
    game_save = save_for(user=request.user, save_id=save_id)
    turn = _turn(request, game_save)
    table = knowledge_at(game_save, turn=turn)
    counts = table.counts()  # one pass over the table's cells, not one per character
    context = save_page_context(request, game_save, "knowledge")
    context.update(
        {
            "turn": turn,
            "table": table,
            "summary": [
                {"name": name, "present": name in table.presence.get(turn, []), **counts[name]}
                for name in table.characters
            ],
            "reveals": _with_titles(
                game_save,
                Reveal.objects.filter(game_save=game_save, turn_id__lte=turn)
                .select_related("fact")
                .order_by("turn_id", "id"),
            ),
            "entries": [(s["entry_id"], s["title"]) for s in table.secrets],
        }
    )
    template = "memory/knowledge.html#knowledge-table" if request.htmx else "memory/knowledge.html"
    return render(request, template, context)


@require_GET
def knowledge_character(request: HttpRequest, save_id: str, name: str) -> HttpResponse:
    game_save = save_for(user=request.user, save_id=save_id)
    turn = _turn(request, game_save)
    context = save_page_context(request, game_save, "knowledge")
    context.update({"turn": turn, "name": name, "events": character_timeline(game_save, character=name, turn=turn)})
    return render(request, "memory/knowledge_character.html", context)


@require_POST
def presence_edit(request: HttpRequest, save_id: str, turn_id: int) -> HttpResponse:
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    names = [n for n in request.POST.getlist("present") if n.strip()]
    names += [n.strip() for n in request.POST.get("others", "").split(",") if n.strip()]
    error = ""
    try:
        presence_set(game_save=game_save, turn_id=turn_id, characters=names)
    except ValueError as exc:
        error = str(exc)
    if request.htmx:
        response = render(
            request, "memory/presence_fragment.html", {"save": game_save, "turn_id": turn_id, "error": error}
        )
        return response
    if error:
        messages.error(request, error)
    else:
        messages.success(request, f"Presence at turn {turn_id} saved.")
    return HttpResponseRedirect(_next_or(request, reverse("saves:turn_detail", args=[game_save.save_id, turn_id])))


def _next_or(request: HttpRequest, default: str) -> str:
    """Return the form's `next` when it is a path of this site (never another site, never a bare name), else `default`."""
    target = request.POST.get("next", "")
    allowed = {request.get_host()}
    if target.startswith("/") and url_has_allowed_host_and_scheme(target, allowed, require_https=request.is_secure()):
        return target
    return default


@require_POST
def reveal_create(request: HttpRequest, save_id: str) -> HttpResponse:
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    target = request.POST.get("target", "").strip()
    turn = request.POST.get("turn", "").strip()
    try:
        if not turn.isdigit():
            raise ValueError("the turn is a whole number")
        kind, _, ident = target.partition(":")
        if kind == "fact" and ident.isdigit():
            fact_id, entry_id = int(ident), ""
        elif kind == "entry" and ident:
            fact_id, entry_id = None, ident
        else:
            raise ValueError("choose a fact or a lore entry to reveal")
        reveal_add(
            game_save=game_save,
            turn_id=int(turn),
            character=request.POST.get("character", ""),
            fact_id=fact_id,
            entry_id=entry_id,
            told_by=request.POST.get("told_by", "").strip(),
        )
        messages.success(request, "Reveal added.")
    except ValueError as exc:
        messages.error(request, f"Reveal not added: {exc}")
    return redirect(reverse("memory:knowledge", args=[game_save.save_id]) + f"?turn={game_save.current_turn}")


@require_POST
def reveal_remove(request: HttpRequest, save_id: str, reveal_id: int) -> HttpResponse:
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    if reveal_delete(game_save=game_save, reveal_id=reveal_id):
        messages.success(request, "Reveal removed.")
    else:
        messages.error(request, "No such reveal in this save.")
    return redirect(reverse("memory:knowledge", args=[game_save.save_id]) + f"?turn={game_save.current_turn}")
