"""Import and export: Universe-as-Code TOML, Character Card character_book, SillyTavern."""

from __future__ import annotations

import hashlib
import json

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from studio.roles import is_author
from studio.universes import services
from studio.universes.forms import LoreImportForm, TomlImportForm
from studio.universes.interchange import (
    ImportFormatError,
    MAX_IMPORT_BYTES,
    card_export,
    card_png,
    character_card,
    pending,
    sillytavern,
    toml_io,
)
from studio.world.models import Universe
from studio.universes.selectors import universe_list_for_user, with_link_ids
from studio.universes.access import Access, require, universe_for
from studio.universes.views.common import universe_context


def _attachment(content: bytes | str, filename: str, content_type: str) -> HttpResponse:
    if isinstance(content, str):
        content = content.encode("utf-8")
    response = HttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _json(data) -> bytes:
    return json.dumps(data, ensure_ascii=False, indent=2).encode("utf-8")


def selection_export_response(universe: Universe, entries, export_format: str) -> HttpResponse:
    """Return a download of `entries` (a queryset) in the chosen format."""
    entries = list(with_link_ids(entries))
    if export_format == "sillytavern":
        return _attachment(
            _json(sillytavern.export_world_info(universe, entries)),
            f"{universe.slug}-selection-world-info.json",
            "application/json",
        )
    if export_format == "card":
        return _attachment(
            _json(card_export.export_card(universe, entries, version=2)),
            f"{universe.slug}-selection-card.json",
            "application/json",
        )
    return _attachment(
        toml_io.export_universe(universe, entries=entries), f"{universe.slug}-selection.toml", "application/toml"
    )


@require_GET
def exchange_page(request: HttpRequest, slug: str) -> HttpResponse:
    universe = universe_for(user=request.user, slug=slug)
    context = {
        **universe_context(request, universe, "exchange"),
        "import_form": LoreImportForm(),
        "toml_form": TomlImportForm(),
        "max_bytes": MAX_IMPORT_BYTES,
        "characters": services.card_characters(universe=universe),
    }
    template = "universes/exchange.html#import-panel" if request.htmx else "universes/exchange.html"
    return render(request, template, context)


@require_GET
def export_toml(request: HttpRequest, slug: str) -> HttpResponse:
    universe = universe_for(user=request.user, slug=slug)
    return _attachment(toml_io.export_universe(universe), f"{universe.slug}.toml", "application/toml")


@require_GET
def export_sillytavern(request: HttpRequest, slug: str) -> HttpResponse:
    universe = universe_for(user=request.user, slug=slug)
    entries = list(with_link_ids(universe.lore_entries.all()))
    return _attachment(
        _json(sillytavern.export_world_info(universe, entries)), f"{universe.slug}-world-info.json", "application/json"
    )


def _card_export(request: HttpRequest, universe: Universe):
    """Return (Character entry or None, book entries, file name stem) for a card export.

    `?character=<entry_id>` picks a Character entry an imported card made (default: the one
    the `character_card` meta key names, when it still exists); its card carries the entries
    tagged with it. `?character=` (empty) exports the whole Lore Book as the universe's card.
    """
    wanted = request.GET.get("character")
    if wanted is None:
        pointer = card_export.meta_json(universe, services.CHARACTER_CARD_META)
        wanted = str(pointer.get("entry_id") or "")
    character = None
    if wanted:
        character = next((c for c in services.card_characters(universe=universe) if c.entry_id == wanted), None)
        if character is None and "character" in request.GET:
            raise Http404("No Character entry of that id came from a card.")
    if character is None:
        return None, list(with_link_ids(universe.lore_entries.all())), universe.slug
    entries = universe.lore_entries.filter(extensions__card=character.entry_id)
    return character, list(with_link_ids(entries)), f"{universe.slug}-{character.entry_id}"


@require_GET
def export_card(request: HttpRequest, slug: str) -> HttpResponse:
    universe = universe_for(user=request.user, slug=slug)
    character, entries, stem = _card_export(request, universe)
    asked = request.GET.get("version")
    version = 3 if asked == "3" else 2 if asked == "2" else card_export.card_version(character)
    return _attachment(
        _json(card_export.export_card(universe, entries, version=version, character=character)),
        f"{stem}-card-v{version}.json",
        "application/json",
    )


@require_GET
def export_card_png(request: HttpRequest, slug: str) -> HttpResponse:
    universe = universe_for(user=request.user, slug=slug)
    character, entries, stem = _card_export(request, universe)
    return _attachment(card_export.export_png(universe, entries, character=character), f"{stem}-card.png", "image/png")


def _parse_lore_file(data: bytes, name: str, chosen: str):
    if chosen == "card":
        return character_card.parse_card(data, filename=name)
    if chosen == "sillytavern":
        return sillytavern.parse_world_info(data)
    if data.startswith(card_png.PNG_SIGNATURE) or name.lower().endswith(".png"):
        return character_card.parse_card(data, filename=name)
    try:
        doc = json.loads(data.decode("utf-8")) if len(data) <= MAX_IMPORT_BYTES else None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        doc = None  # the parser below names the problem
    if isinstance(doc, dict) and "entries" in doc and isinstance(doc["entries"], dict):
        return sillytavern.parse_world_info(data)
    return character_card.parse_card(data, filename=name)


def _lore_file(request: HttpRequest, form: LoreImportForm) -> tuple[bytes, str]:
    """The file's bytes and name: the upload, or the one kept since the title-merge preview."""
    upload = form.cleaned_data.get("file")
    if upload:
        return upload.read(MAX_IMPORT_BYTES + 1), upload.name or ""
    data = pending.fetch(user_pk=request.user.pk, token=form.cleaned_data["token"])
    if data is None:
        raise ImportFormatError("This preview has expired (or belongs to another user); upload the file again.")
    return data, form.cleaned_data.get("filename") or ""


@require_POST
def lore_import(request: HttpRequest, slug: str) -> HttpResponse:
    """Import a Character Card or SillyTavern file into this Lore Book and show the report.

    When the import would merge some of the file's entries into existing entries by title
    alone, nothing is written yet: the page lists them and asks (merge them, or import them
    as new entries); the file waits in `pending` for the answer.
    """
    universe = universe_for(user=request.user, slug=slug, access=Access.EDIT)
    form = LoreImportForm(request.POST, request.FILES)
    context = {
        **universe_context(request, universe, "exchange"),
        "import_form": form,
        "toml_form": TomlImportForm(),
        "max_bytes": MAX_IMPORT_BYTES,
        "characters": services.card_characters(universe=universe),
    }
    if form.is_valid():
        data = form.cleaned_data
        try:
            raw, filename = _lore_file(request, form)
            book = _parse_lore_file(raw, filename, data["format"])
            is_card = book.card is not None
            mode = data["character"] or "create"
            answer = data["titles"]  # "" until the author answered the title-merge question
            match_titles = {"new": False, "merge": True}.get(answer, data["match_titles"] if is_card else True)
            if match_titles and not answer:
                merges = (
                    services.card_import_title_merges(universe=universe, book=book, mode=mode, match_titles=True)
                    if is_card
                    else services.lore_import_title_merges(universe=universe, book=book)
                )
                if merges:
                    context.update(
                        merges=merges,
                        filename=filename,
                        values=data,
                        token=data["token"] or pending.stash(user_pk=request.user.pk, data=raw),
                    )
                    template = (
                        "universes/exchange.html#merge-preview" if request.htmx else "universes/import_merge.html"
                    )
                    return render(request, template, context)
            if is_card:
                report = services.card_import(
                    universe=universe,
                    user=request.user,
                    book=book,
                    mode=mode,
                    match_titles=match_titles,
                    default_kind=data["default_kind"],
                )
            else:
                report = services.lore_import(
                    universe=universe,
                    user=request.user,
                    book=book,
                    default_kind=data["default_kind"],
                    match_titles=match_titles,
                )
        except (ImportFormatError, ValidationError) as exc:
            message = str(exc) if isinstance(exc, ImportFormatError) else "; ".join(exc.messages)
            form.add_error("file", f"Nothing was imported. {message}")
        else:
            if data["token"]:
                pending.drop(user_pk=request.user.pk, token=data["token"])
            context["report"] = report
            context["filename"] = filename
            template = "universes/exchange.html#report" if request.htmx else "universes/import_report.html"
            return render(request, template, context)
    template = "universes/exchange.html#import-panel" if request.htmx else "universes/exchange.html"
    return render(request, template, context, status=200 if request.htmx else 400)


@require_http_methods(["GET", "POST"])
def toml_import(request: HttpRequest) -> HttpResponse:
    """Import Universe-as-Code: a new universe is created; an existing one is diffed first."""
    require(request.user, Access.EDIT)
    context = {"max_bytes": MAX_IMPORT_BYTES, "can_edit": is_author(request.user)}
    if request.method == "GET":
        context["form"] = TomlImportForm()
        return render(request, "universes/toml_import.html", context)
    form = TomlImportForm(request.POST, request.FILES)
    context["form"] = form
    if not form.is_valid():
        return render(request, "universes/toml_import.html", context, status=400)
    upload = form.cleaned_data.get("file")
    token = form.cleaned_data.get("token", "")
    try:
        if upload:
            raw = upload.read(MAX_IMPORT_BYTES + 1)
        else:
            raw = pending.fetch(user_pk=request.user.pk, token=token)
            if raw is None:
                raise ImportFormatError("This preview has expired (or belongs to another user); upload the file again.")
        document = toml_io.parse_document(raw)
    except ImportFormatError as exc:
        context["error"] = f"Nothing was imported. {exc}"
        return render(request, "universes/toml_import.html", context, status=400)
    existing = Universe.objects.filter(slug=document.slug).first()
    if existing is not None and not universe_list_for_user(user=request.user).filter(pk=existing.pk).exists():
        context["error"] = (
            f"Nothing was imported. universe.slug: “{document.slug}” belongs to a universe you "
            "cannot edit; change the slug to import a copy."
        )
        return render(request, "universes/toml_import.html", context, status=400)
    if existing is not None:
        current = toml_io.export_universe(existing)
        current_digest = hashlib.sha256(current.encode("utf-8")).hexdigest()
        confirmed = (
            bool(token) and request.POST.get("confirm") == "1" and form.cleaned_data.get("digest") == current_digest
        )
        if not confirmed:
            context.update(
                {
                    "universe": existing,
                    "document": document,
                    "diff": toml_io.diff_document(existing, document),
                    "digest": current_digest,
                    "changed_meanwhile": request.POST.get("confirm") == "1",
                    "token": token or pending.stash(user_pk=request.user.pk, data=raw),
                }
            )
            return render(request, "universes/toml_preview.html", context)
    try:
        universe, counts = services.universe_import_document(user=request.user, document=document, universe=existing)
    except ValidationError as exc:
        context["error"] = "Nothing was imported. " + "; ".join(exc.messages)
        return render(request, "universes/toml_import.html", context, status=400)
    if token:
        pending.drop(user_pk=request.user.pk, token=token)
    messages.success(
        request,
        f"Imported “{universe.name}”: {counts['created']} entries created, {counts['updated']} updated, "
        f"{counts['deleted']} deleted, {counts['unchanged']} unchanged; memory tests: {counts['tests_created']} "
        f"created, {counts['tests_updated']} updated, {counts['tests_deleted']} deleted.",
    )
    return redirect(universe.get_absolute_url())
