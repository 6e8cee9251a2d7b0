"""Export a save as a file, and import such a file as a new save (the pages).

Both need the playtester role and membership of the universe: an export answers 404 for a
save the user may not see, an import offers only the universes the user belongs to. The
work is in `studio.saves.portable`; these views check access and render.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import FileResponse, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseClientRedirect

from studio.plural import counted
from studio.saves import portable
from studio.saves.forms import SaveImportForm
from studio.saves.access import Access, require, save_for
from studio.universes.selectors import universe_list_for_user


@require_GET
def save_export(request: HttpRequest, save_id: str) -> FileResponse:
    """Download the save as one file (`?compress=gzip` for a .json.gz)."""
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    export = portable.save_export(game_save=game_save, compress=request.GET.get("compress") == "gzip")
    return FileResponse(export.file, as_attachment=True, filename=export.filename, content_type=export.content_type)


@require_http_methods(["GET", "POST"])
def save_import(request: HttpRequest) -> HttpResponse:
    """Upload a save file: check it whole, then create a new save from it (or list the problems)."""
    require(request.user, Access.PLAY)
    universes = universe_list_for_user(user=request.user).order_by("name")
    initial = {}
    slug = request.GET.get("universe", "").strip()
    if slug:
        initial["universe"] = universes.filter(slug=slug).first()
    max_bytes = portable.max_file_bytes()
    form = SaveImportForm(
        request.POST or None, request.FILES or None, universes=universes, initial=initial, max_bytes=max_bytes
    )
    problems: list[portable.Problem] = []
    if request.method == "POST" and form.is_valid():
        try:
            checked = portable.save_file_read(data=form.cleaned_data["file"].read())
        except portable.SaveFileError as exc:
            problems = exc.problems
        else:
            universe = form.cleaned_data["universe"] or universes.filter(slug=checked.universe["slug"]).first()
            if universe is None:
                form.add_error(
                    "universe",
                    f"The file comes from the universe “{checked.universe['name']}” ({checked.universe['slug']}), "
                    "which is not one of yours here; pick a universe.",
                )
            else:
                result = portable.save_import(universe=universe, checked=checked, name=form.cleaned_data["name"])
                game_save = result.game_save
                messages.success(
                    request,
                    f"Imported “{game_save.name}” into {universe.name}: "
                    f"{counted(result.counts.get('turns', 0), 'turn')}, {counted(result.counts.get('facts', 0), 'fact')}, "
                    f"{counted(result.counts.get('beliefs', 0), 'belief')}, "
                    f"{counted(result.counts.get('mental_models', 0), 'mental model')}. Its memory chunks are being "
                    f"rebuilt ({counted(result.jobs_queued, 'embedding job')} queued).",
                )
                for warning in result.warnings:
                    messages.warning(request, warning)
                if request.htmx:
                    return HttpResponseClientRedirect(game_save.get_absolute_url())
                return redirect(game_save.get_absolute_url())
    context = {"form": form, "problems": problems, "max_bytes": max_bytes}
    template = "saves/import_save.html#import-save-form" if request.htmx else "saves/import_save.html"
    return render(request, template, context)
