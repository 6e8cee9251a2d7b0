"""Belief missions: the universe-wide mission and per-character missions.

Per-character missions are edited either as a table (a character picked from the Lore
Book's characters, or any name) or as the "Name: mission" text block; both are views of
the same `belief_missions` meta value, converted with the engine's `parse_missions_text`
(through `services.missions_from_text`) and `missions_to_text`, and every save re-renders
both. Every check is the service's (`missions_set` → `missions_validate`): the views only
show its errors.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from studio.memory.missions import get_belief_missions_from_value, missions_to_text
from studio.universes import services
from studio.universes.forms import MissionsTextForm, UniverseMissionForm
from studio.universes.selectors import character_names
from studio.universes.access import Access, universe_for
from studio.universes.views.common import universe_context

EMPTY_TABLE_ROWS = 3


def _current(universe) -> tuple[str, dict[str, str]]:
    meta = dict(
        universe.meta.filter(key__in=[services.BELIEF_MISSION, services.BELIEF_MISSIONS]).values_list("key", "value")
    )
    return (
        meta.get(services.BELIEF_MISSION, ""),
        get_belief_missions_from_value(meta.get(services.BELIEF_MISSIONS, "")),
    )


def _context(request, universe, **extra) -> dict:
    universe_mission, missions = _current(universe)
    rows = [{"name": name, "mission": mission} for name, mission in missions.items()]
    if "rows_posted" in extra:  # a rejected save shows what was typed, not the stored rows
        rows = [{"name": n, "mission": m} for n, m in extra.pop("rows_posted") if n.strip() or m.strip()]
    rows += [{"name": "", "mission": ""} for _ in range(EMPTY_TABLE_ROWS)]
    context = {
        **universe_context(request, universe, "missions"),
        "universe_form": UniverseMissionForm(initial={"mission": universe_mission}),
        "text_form": MissionsTextForm(initial={"text": missions_to_text(missions)}),
        "rows": rows,
        "mission_count": len(missions),
        "characters": character_names(universe=universe),
        "characters_without_mission": [n for n in character_names(universe=universe) if n not in missions],
    }
    context.update(extra)
    return context


def _respond(request, universe, note: str, **extra) -> HttpResponse:
    if request.htmx:
        return render(request, "universes/missions.html#panel", _context(request, universe, note=note, **extra))
    if extra.get("errors"):
        return render(request, "universes/missions.html", _context(request, universe, **extra), status=400)
    messages.success(request, note)
    return redirect("universes:missions", slug=universe.slug)


@require_GET
def missions_page(request: HttpRequest, slug: str) -> HttpResponse:
    universe = universe_for(user=request.user, slug=slug)
    template = "universes/missions.html#panel" if request.htmx else "universes/missions.html"
    return render(request, template, _context(request, universe))


def _saved(missions: dict[str, str]) -> str:
    return f"Saved {len(missions)} character mission{'s' if len(missions) != 1 else ''}."


@require_POST
def missions_universe(request: HttpRequest, slug: str) -> HttpResponse:
    universe = universe_for(user=request.user, slug=slug, access=Access.EDIT)
    form = UniverseMissionForm(request.POST)
    if not form.is_valid():  # e.g. a NUL character: nothing is written (an empty mission would delete it)
        return _respond(request, universe, "", errors=form.errors.get("mission", ["The form is invalid."]))
    try:
        services.missions_set(universe=universe, universe_mission=form.cleaned_data["mission"])
    except ValidationError as exc:
        return _respond(request, universe, "", errors=exc.messages)
    return _respond(request, universe, "Saved the universe mission.")


@require_POST
def missions_table(request: HttpRequest, slug: str) -> HttpResponse:
    """Save the per-character table: rows with a name; a row whose name is cleared is removed."""
    universe = universe_for(user=request.user, slug=slug, access=Access.EDIT)
    rows = list(zip(request.POST.getlist("name"), request.POST.getlist("mission")))
    try:
        missions = services.missions_set(universe=universe, missions=rows)
    except ValidationError as exc:
        return _respond(request, universe, "", errors=exc.messages, rows_posted=rows)
    return _respond(request, universe, _saved(missions))


@require_POST
def missions_text(request: HttpRequest, slug: str) -> HttpResponse:
    """Save the "Name: mission" block; lines without a colon are reported, not silently lost."""
    universe = universe_for(user=request.user, slug=slug, access=Access.EDIT)
    form = MissionsTextForm(request.POST)
    form.is_valid()
    missions, ignored = services.missions_from_text(form.cleaned_data.get("text", ""))
    try:
        missions = services.missions_set(universe=universe, missions=missions)
    except ValidationError as exc:
        return _respond(request, universe, "", errors=exc.messages)
    note = _saved(missions)
    if ignored:
        note += " Ignored lines without “Name: mission”: " + "; ".join(f"“{line[:60]}”" for line in ignored)
    return _respond(request, universe, note)
