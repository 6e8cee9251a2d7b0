"""The timeline: the chapters as bands over the turns, the turns with the facts they produced
and their jobs; editing a turn's narrative."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseStopPolling

from studio.memory.chapters.selectors import chapters_for, open_start_of
from studio.saves.forms import NarrativeEditForm
from studio.saves.narrator.selectors import snapshot_turn_ids
from studio.memory.knowledge.presence import presence_by_turn
from studio.saves.selectors import attach_turn_chunks, timeline_page, timeline_turn, turn_llm_calls
from studio.saves.access import Access, save_for
from studio.saves.views.chapters import chapter_band_levels
from studio.saves.views.saves import save_page_context

PENDING_JOB_STATES = ("queued", "running")


@require_GET
def timeline(request: HttpRequest, save_id: str) -> HttpResponse:
    game_save = save_for(user=request.user, save_id=save_id)
    page, turns = timeline_page(game_save=game_save, page_number=request.GET.get("page", 1))
    attach_turn_chunks(game_save=game_save, turns=turns)
    context = save_page_context(request, game_save, "timeline")
    context.update({"page": page, "turns": turns})
    context["snapshot_turns"] = snapshot_turn_ids(game_save=game_save, turn_ids=[t.turn_id for t in turns])
    context["presence_rows"] = presence_by_turn(game_save, turn_ids=[t.turn_id for t in turns])
    if request.htmx:  # a page of turns; the chapter bands above them stay as they are
        return render(request, "saves/timeline.html#turns", context)
    rows = list(chapters_for(game_save))
    context.update(
        {
            "band_levels": chapter_band_levels(game_save, rows),
            "chapter_count": sum(1 for row in rows if row.level == 0),
            "arc_count": sum(1 for row in rows if row.level == 1),
            "open_start": open_start_of(rows),
        }
    )
    return render(request, "saves/timeline.html", context)


@require_GET
def turn_detail(request: HttpRequest, save_id: str, turn_id: int) -> HttpResponse:
    """One turn of the timeline (the fragment an edit's Cancel swaps back in)."""
    game_save = save_for(user=request.user, save_id=save_id)
    context = save_page_context(request, game_save, "timeline")
    turn = timeline_turn(game_save=game_save, turn_id=turn_id)
    attach_turn_chunks(game_save=game_save, turns=[turn])
    context["turn"] = turn
    context["snapshot_turns"] = snapshot_turn_ids(game_save=game_save, turn_ids=[turn_id])
    if not request.htmx:
        context["llm_calls"], context["earlier_llm_calls"] = turn_llm_calls(game_save=game_save, turn=turn)
        from studio.memory.continuity.guard import settings_for
        from studio.memory.continuity.selectors import findings_for_turn

        context["turn_findings"] = findings_for_turn(game_save=game_save, turn_id=turn_id)
        context["guard_mode"] = settings_for(game_save).mode
        return render(request, "saves/turn.html", context)
    # The row polls itself while its jobs run; htmx is told to stop once they are settled.
    response_class = HttpResponse if turn.job_state in PENDING_JOB_STATES else HttpResponseStopPolling
    return response_class(render_to_string("saves/timeline.html#turn", context, request=request))


def _edited_on_console(request: HttpRequest, game_save, turn_id: int) -> HttpResponse:
    from studio.saves.views.saves import console_context

    note = f"Turn {turn_id} updated; its memory is being rebuilt (re-embedded, and re-extracted in living mode)."
    if not request.htmx:
        messages.success(request, note)
        return redirect("saves:detail", save_id=game_save.save_id)
    context = console_context(request, game_save)
    context["notice"] = note
    return render(request, "saves/console.html#console", context)


@require_http_methods(["GET", "POST"])
def turn_edit(request: HttpRequest, save_id: str, turn_id: int) -> HttpResponse:
    """Show the narrative editor (GET) or replace the turn's narrative (POST).

    Saving re-embeds the turn and, in living mode, re-extracts its facts (the service does
    both, after commit).
    """
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    turn = timeline_turn(game_save=game_save, turn_id=turn_id)
    context = save_page_context(request, game_save, "timeline")
    if request.method == "POST":
        form = NarrativeEditForm(request.POST)
        if form.is_valid():
            from studio.saves.services import turn_update_narrative

            turn_update_narrative(game_save=game_save, turn_id=turn_id, narrative=form.cleaned_data["narrative"])
            if request.POST.get("next") == "console":  # the Console's in-place edit of a past turn
                return _edited_on_console(request, game_save, turn_id)
            if not request.htmx:
                messages.success(request, f"Turn {turn_id} updated; its memory is being rebuilt.")
                url = reverse("saves:timeline", kwargs={"save_id": game_save.save_id})
                return redirect(f"{url}#turn-{turn_id}")
            edited = timeline_turn(game_save=game_save, turn_id=turn_id)
            attach_turn_chunks(game_save=game_save, turns=[edited])
            context.update({"turn": edited, "edited": True})
            context["snapshot_turns"] = snapshot_turn_ids(game_save=game_save, turn_ids=[turn_id])
            return render(request, "saves/timeline.html#turn", context)
    else:
        form = NarrativeEditForm(initial={"narrative": turn.event.narrative})
    context.update({"turn": turn, "form": form})
    template = "saves/timeline.html#turn-edit" if request.htmx else "saves/turn_edit.html"
    return render(request, template, context)
