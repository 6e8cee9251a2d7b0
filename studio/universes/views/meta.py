"""Universe_Meta: the key/value table, edited inline."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import reswap, retarget

from studio.universes import services
from studio.universes.forms import MetaForm, OpeningForm, PersonaForm, greetings_as_text
from studio.universes.meta_display import meta_summary
from studio.universes.meta_keys import KNOWN_BY_KEY, KNOWN_META_KEYS, known_key_groups
from studio.universes.opening import opening_from_meta
from studio.universes.portraits import portrait_load
from studio.universes.access import Access, universe_for
from studio.universes.views.common import universe_context

KNOWN_KEYS = {item.key: item.help for item in KNOWN_META_KEYS}


def _context(request, universe, open_key: str = "", **extra) -> dict:
    """The page's context from one read of the meta rows (the persona and `open_key`'s form use them too)."""
    rows = list(universe.meta.all())
    for row in rows:
        row.known_help = KNOWN_KEYS.get(row.key, "")
        row.summary = meta_summary(universe=universe, key=row.key, value=row.value)
    stored = {row.key: row for row in rows}
    values = {row.key: row.value for row in rows}
    known_groups = [
        (group, [{**item, "row": stored.get(item["meta"].key)} for item in items])
        for group, items in known_key_groups(values)
    ]
    persona = services.persona_of(universe=universe, meta=values)
    opening = opening_from_meta(values)
    if open_key and "form" not in extra:
        extra["form"] = MetaForm(initial={"key": open_key, "value": values.get(open_key, "")})
    return {
        **universe_context(request, universe, "meta"),
        "rows": rows,
        "free_rows": [row for row in rows if row.key not in KNOWN_BY_KEY],
        "known_groups": known_groups,
        "known_keys": KNOWN_KEYS,
        "persona": persona,
        "persona_form": extra.pop("persona_form", None)
        or PersonaForm(initial={"name": persona.name, "description": persona.description}),
        "opening": opening,
        "opening_form": extra.pop("opening_form", None)
        or OpeningForm(
            initial={
                "first_message": opening.first_message,
                "scenario": opening.scenario,
                "alternate_greetings": greetings_as_text(opening.alternate_greetings),
            }
        ),
        "form": extra.pop("form", None) or MetaForm(),
        **extra,
    }


@require_GET
def meta_page(request: HttpRequest, slug: str) -> HttpResponse:
    """The page; `?key=` opens the add form on that key with its current value (the known keys' Set links)."""
    universe = universe_for(user=request.user, slug=slug)
    template = "universes/meta.html#meta-table" if request.htmx else "universes/meta.html"
    return render(request, template, _context(request, universe, open_key=request.GET.get("key", "").strip()))


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
        if request.htmx:  # the table, and a fresh add form out of band: the form does not keep the last key
            return render(request, "universes/meta.html#saved", _context(request, universe, saved=key))
        messages.success(request, f"Saved “{key}”.")
        return redirect("universes:meta", slug=universe.slug)
    if request.htmx:
        if row_id:
            row = get_object_or_404(universe.meta, pk=row_id)
            response = render(
                request,
                "universes/meta.html#edit-row",
                {**universe_context(request, universe, "meta"), "row": row, "edit_form": form},
            )
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


@require_POST
def persona_save(request: HttpRequest, slug: str) -> HttpResponse:
    """Store the player's persona: name, description and an optional PNG portrait."""
    universe = universe_for(user=request.user, slug=slug, access=Access.EDIT)
    form = PersonaForm(request.POST, request.FILES)
    if form.is_valid():
        upload = form.cleaned_data.get("portrait")
        try:
            persona = services.persona_set(
                universe=universe,
                name=form.cleaned_data["name"],
                description=form.cleaned_data["description"],
                portrait=upload.read(services.MAX_PORTRAIT_BYTES + 1) if upload else None,
                remove_portrait=form.cleaned_data["remove_portrait"],
            )
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            message = f"Saved the persona “{persona.name}”." if persona.name else "Removed the persona."
            if request.htmx:
                return render(
                    request, "universes/meta.html#persona", _context(request, universe, persona_saved=message)
                )
            messages.success(request, message)
            return redirect("universes:meta", slug=universe.slug)
    template = "universes/meta.html#persona" if request.htmx else "universes/meta.html"
    return render(
        request, template, _context(request, universe, persona_form=form), status=200 if request.htmx else 400
    )


@require_GET
def persona_portrait(request: HttpRequest, slug: str) -> HttpResponse:
    """The persona's portrait (PNG), or 404."""
    universe = universe_for(user=request.user, slug=slug)
    data = portrait_load(services.persona_of(universe=universe).portrait)
    if data is None:
        raise Http404("This universe's persona has no portrait.")
    response = HttpResponse(data, content_type="image/png")
    response["Cache-Control"] = "private, max-age=3600"
    return response


@require_POST
def opening_save(request: HttpRequest, slug: str) -> HttpResponse:
    """Store the universe's opening: first message, alternate greetings, scenario."""
    universe = universe_for(user=request.user, slug=slug, access=Access.EDIT)
    form = OpeningForm(request.POST)
    if form.is_valid():
        try:
            services.opening_set(universe=universe, **form.cleaned_data)
        except ValidationError as exc:
            for name, problems in exc.message_dict.items():
                form.add_error(name if name in form.fields else None, problems)
        else:
            count = len(form.cleaned_data["alternate_greetings"])
            message = (
                "Saved the opening: the first message"
                + (f" and {count} alternate greeting{'s' if count != 1 else ''}." if count else ".")
                if form.cleaned_data["first_message"].strip()
                else "Saved: this universe has no opening of its own."
            )
            if not request.htmx:
                messages.success(request, message)
                return redirect(reverse("universes:meta", args=[universe.slug]) + "#opening")
            return render(request, "universes/meta.html#opening", _context(request, universe, opening_saved=message))
    template = "universes/meta.html#opening" if request.htmx else "universes/meta.html"
    return render(
        request, template, _context(request, universe, opening_form=form), status=200 if request.htmx else 400
    )
