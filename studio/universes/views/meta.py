"""Universe_Meta: the key/value table, edited inline."""
from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import reswap, retarget

from studio.universes import services
from studio.universes.forms import MetaForm
from studio.universes.meta_display import meta_summary
from studio.universes.access import Access, universe_for
from studio.universes.views.common import universe_context

KNOWN_KEYS = {
    services.BELIEF_MISSION: "The universe-wide belief mission (text).",
    services.BELIEF_MISSIONS: 'Per-character missions: a JSON object, {"Name": "mission"}.',
    services.CHARACTER_CARD_META: ("The Character entry of the last imported Character Card (JSON object: entry_id, "
                                   "name, spec); the card's fields are shown from that entry."),
    services.CHARACTER_BOOK_META: "Fields of an imported character_book (JSON object), kept for re-export.",
    services.SILLYTAVERN_META: "Fields of an imported SillyTavern world-info file (JSON object).",
    "narrator_instructions": (
        "The narrator's instructions, a template: {{narrator_style}}, {{tone}}, {{player_character}}, {{era}}, "
        "any other key, {{meta}} and {{user}} / {{char}} are filled in (preview it from a save's Console)."
    ),
}


def _context(request, universe, **extra) -> dict:
    rows = list(universe.meta.all())
    for row in rows:
        row.known_help = KNOWN_KEYS.get(row.key, "")
        row.summary = meta_summary(universe=universe, key=row.key, value=row.value)
    return {
        **universe_context(request, universe, "meta"),
        "rows": rows,
        "known_keys": KNOWN_KEYS,
        "form": extra.pop("form", None) or MetaForm(),
        **extra,
    }


@require_GET
def meta_page(request: HttpRequest, slug: str) -> HttpResponse:
    universe = universe_for(user=request.user, slug=slug)
    template = "universes/meta.html#meta-table" if request.htmx else "universes/meta.html"
    return render(request, template, _context(request, universe))


@require_POST
def meta_save(request: HttpRequest, slug: str) -> HttpResponse:
    """Create or update one key. From an inline row edit, `row_id` names the row being edited."""
    universe = universe_for(user=request.user, slug=slug, access=Access.EDIT)
    form = MetaForm(request.POST)
    row_id = request.POST.get("row_id", "")
    if form.is_valid():
        key = form.cleaned_data["key"]
        if row_id:
            old = get_object_or_404(universe.meta, pk=row_id)
            if old.key != key:
                services.meta_delete(universe=universe, key=old.key)
        services.meta_set(universe=universe, key=key, value=form.cleaned_data["value"])
        if request.htmx:
            return render(request, "universes/meta.html#meta-table", _context(request, universe, saved=key))
        messages.success(request, f"Saved “{key}”.")
        return redirect("universes:meta", slug=universe.slug)
    if request.htmx:
        if row_id:
            row = get_object_or_404(universe.meta, pk=row_id)
            response = render(request, "universes/meta.html#edit-row",
                              {**universe_context(request, universe, "meta"), "row": row, "edit_form": form})
            return reswap(retarget(response, f"#meta-row-{row.pk}"), "outerHTML")
        response = render(request, "universes/meta.html#add-form", _context(request, universe, form=form))
        return reswap(retarget(response, "#meta-add"), "outerHTML")
    return render(request, "universes/meta.html", _context(request, universe, form=form), status=400)


@require_GET
def meta_edit(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    universe = universe_for(user=request.user, slug=slug, access=Access.EDIT)
    row = get_object_or_404(universe.meta, pk=pk)
    form = MetaForm(initial={"key": row.key, "value": row.value})
    context = {**universe_context(request, universe, "meta"), "row": row, "edit_form": form}
    if request.htmx:
        return render(request, "universes/meta.html#edit-row", context)
    return render(request, "universes/meta_edit.html", context)


@require_http_methods(["POST"])
def meta_delete(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    universe = universe_for(user=request.user, slug=slug, access=Access.EDIT)
    row = get_object_or_404(universe.meta, pk=pk)
    services.meta_delete(universe=universe, key=row.key)
    if request.htmx:
        return render(request, "universes/meta.html#meta-table", _context(request, universe))
    messages.success(request, f"Deleted “{row.key}”.")
    return redirect(reverse("universes:meta", kwargs={"slug": universe.slug}))
