"""Import a save from a transcript (JSON Lines) or a LoCoMo conversation file."""

from __future__ import annotations

import json

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from studio.plural import counted
from studio.saves import importers
from studio.saves.forms import ImportForm
from studio.saves.access import Access, require
from studio.universes.selectors import universe_list_for_user

KINDS = {
    "transcript": {
        "title": "Import a transcript",
        "help": "A JSON Lines file: one turn per line, "
        '{"player_input": "…", "narrative": "…", "state": {…}}; narrative is required.',
        "url": "saves:import_transcript",
    },
    "locomo": {
        "title": "Import a LoCoMo conversation",
        "help": "A LoCoMo conversation (JSON with speaker_a, speaker_b and session_N lists). "
        "One session becomes one turn; each utterance becomes one memory chunk tagged with its dia_id "
        "(classic memory; the chunks are embedded during the import, which takes a few seconds).",
        "url": "saves:import_locomo",
    },
}


def _import(request: HttpRequest, kind: str) -> HttpResponse:
    require(request.user, Access.PLAY)
    universes = universe_list_for_user(user=request.user).order_by("name")
    form = ImportForm(request.POST or None, request.FILES or None, universes=universes, with_mode=kind == "transcript")
    errors: list[str] = []
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            if kind == "transcript":
                turns = importers.parse_transcript(upload.read().splitlines())
                default_name = upload.name.rsplit(".", 1)[0] or "Imported transcript"
            else:
                try:
                    data = json.loads(upload.read().decode("utf-8-sig"))
                except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                    raise importers.ImportFormatError([f"not a JSON file ({exc})"]) from exc
                default_name, turns = importers.parse_locomo(data)
        except importers.ImportFormatError as exc:
            errors = exc.errors
        else:
            result = None
            if kind == "transcript":
                result = importers.import_transcript(
                    universe=form.cleaned_data["universe"],
                    name=form.cleaned_data["name"] or default_name,
                    memory_mode=form.cleaned_data["memory_mode"],
                    beliefs_enabled=form.cleaned_data["beliefs_enabled"],
                    turns=turns,
                )
                note = f"Imported {counted(result.turns, 'turn')} into “{result.game_save.name}”; their memory jobs are queued."
            else:
                try:
                    result = importers.import_locomo(
                        universe=form.cleaned_data["universe"],
                        name=form.cleaned_data["name"] or default_name,
                        turns=turns,
                    )
                except importers.ImportFormatError as exc:
                    errors = exc.errors
                else:
                    note = f"Imported {result.turns} sessions into “{result.game_save.name}” with {result.chunks} utterance chunks."
                    if not result.chunks:
                        note += " The embedding runtime is unavailable: nothing was embedded."
            if result is not None:
                messages.success(request, note)
                return redirect("saves:detail", save_id=result.game_save.save_id)
    context = {"form": form, "errors": errors, "kind": kind, **KINDS[kind]}
    template = "saves/import.html#import-form" if request.htmx else "saves/import.html"
    return render(request, template, context)


@require_http_methods(["GET", "POST"])
def import_transcript(request: HttpRequest) -> HttpResponse:
    return _import(request, "transcript")


@require_http_methods(["GET", "POST"])
def import_locomo(request: HttpRequest) -> HttpResponse:
    return _import(request, "locomo")
