"""Universe pages: list, create, overview, rename, delete."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from studio.roles import is_author
from studio.universes import services
from studio.universes.forms import UniverseCreateForm, UniverseRenameForm
from studio.universes.selectors import (
    lore_book_totals,
    lore_kind_counts,
    universe_delete_summary,
    universe_list_with_counts,
)
from studio.universes.access import Access, may, require, universe_for
from studio.universes.views.common import universe_context


def _list_context(request: HttpRequest, form: UniverseCreateForm | None = None) -> dict:
    return {
        "universes": universe_list_with_counts(user=request.user),
        "form": form or UniverseCreateForm(),
        "can_edit": is_author(request.user),
    }


@require_GET
def universe_list(request: HttpRequest) -> HttpResponse:
    template = "universes/list.html#universe-table" if request.htmx else "universes/list.html"
    return render(request, template, _list_context(request))


@require_POST
def universe_create(request: HttpRequest) -> HttpResponse:
    require(request.user, Access.EDIT)
    form = UniverseCreateForm(request.POST)
    if form.is_valid():
        try:
            universe = services.universe_create(user=request.user, **form.cleaned_data)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            # A new universe opens on its overview (htmx follows HX-Redirect; the message shows there).
            messages.success(request, f"Created “{universe.name}”. Start its Lore Book, persona and opening from here.")
            if request.htmx:
                return HttpResponseClientRedirect(universe.get_absolute_url())
            return redirect(universe.get_absolute_url())
    if request.htmx:
        return render(request, "universes/list.html#create-form", {"form": form, "can_edit": True})
    return render(request, "universes/list.html", _list_context(request, form), status=400)


@require_GET
def universe_detail(request: HttpRequest, slug: str) -> HttpResponse:
    universe = universe_for(user=request.user, slug=slug)
    context = {
        **universe_context(request, universe, "overview"),
        "totals": lore_book_totals(universe=universe),
        "kind_counts": sorted(lore_kind_counts(universe=universe).items()),
        "meta": universe.meta.all(),
        "saves": universe.saves.all()[:20],
        "can_play": may(request.user, Access.PLAY),
        "persona": services.persona_of(universe=universe),
    }
    return render(request, "universes/detail.html", context)


@require_http_methods(["GET", "POST"])
def universe_rename(request: HttpRequest, slug: str) -> HttpResponse:
    universe = universe_for(user=request.user, slug=slug, access=Access.EDIT)
    context = universe_context(request, universe, "overview")
    if request.method == "GET" and request.htmx and request.GET.get("cancel"):
        return render(request, "universes/rename.html#heading", context)
    if request.method == "POST":
        form = UniverseRenameForm(request.POST)
        if form.is_valid():
            services.universe_rename(universe=universe, **form.cleaned_data)
            if request.htmx:
                return render(request, "universes/rename.html#heading", context)
            messages.success(request, "Renamed.")
            return redirect(universe.get_absolute_url())
    else:
        form = UniverseRenameForm(initial={"name": universe.name, "description": universe.description})
    context["form"] = form
    template = "universes/rename.html#rename-form" if request.htmx else "universes/rename.html"
    status = 400 if form.is_bound and not request.htmx else 200
    return render(request, template, context, status=status)


@require_http_methods(["GET", "POST"])
def universe_delete(request: HttpRequest, slug: str) -> HttpResponse:
    universe = universe_for(user=request.user, slug=slug, access=Access.EDIT)
    if not (request.user.is_staff or universe.owner_id == request.user.pk):
        raise PermissionDenied("Only the universe's owner can delete it.")
    if request.method == "POST":
        if request.POST.get("confirm_slug", "").strip() != universe.slug:
            context = {
                **universe_context(request, universe, "overview"),
                "summary": universe_delete_summary(universe=universe),
                "error": "Type the universe's slug exactly to confirm.",
            }
            return render(request, "universes/delete.html", context, status=400)
        name = universe.name
        services.universe_delete(universe=universe)
        messages.success(request, f"Deleted “{name}” and everything in it.")
        if request.htmx:
            return HttpResponseClientRedirect(reverse("universes:list"))
        return redirect("universes:list")
    context = {**universe_context(request, universe, "overview"), "summary": universe_delete_summary(universe=universe)}
    return render(request, "universes/delete.html", context)
