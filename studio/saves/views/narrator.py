"""The Console's narrator: narrate, stream, regenerate, choose, discard, accept; the prompt
preview and "what the narrator saw at turn N".

Every action answers the narrator panel (`saves/narrator/panel.html`) to htmx, or redirects
to the Console without it. Without JavaScript the narration runs to its end inside the
POST (no streaming), then the Console shows it; with it, the panel carries the stream's URL
and `static/js/narrator.js` reads the streamed text into the page, then asks for the panel.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from studio import limits
from studio.saves.models import NarratorDraft, NarratorSnapshot
from studio.world.models import Save
from studio.saves.narrator import guard, services
from studio.saves.narrator.authors_note import note_of
from studio.saves.narrator.play import shape_action
from studio.saves.narrator.sampler import resolve_sampler
from studio.saves.narrator.prompt import (
    CONFIG,
    DEFAULT_INSTRUCTIONS,
    TEMPLATE_KEY,
    InvalidPlayerInput,
    build_narrator_prompt,
    check_player_input,
)
from studio.saves.narrator.selectors import llm_connected, narrator_panel_context, snapshot_prefix_context
from studio.saves.access import Access, save_for
from studio.saves.views.saves import console_context, save_page_context


def _panel(request: HttpRequest, game_save: Save, *, draft=None, note: str = "", error: str = "") -> HttpResponse:
    """Answer the narrator panel (htmx; the play status line swapped with it) or redirect to the Console."""
    if not request.htmx:
        if error:
            messages.error(request, error)
        elif note:
            messages.info(request, note)
        return redirect("saves:detail", save_id=game_save.save_id)
    context = save_page_context(request, game_save, "console")
    context.update(narrator_panel_context(game_save=game_save, draft=draft))
    context.update({"notice": note, "narrator_error": error, "panel_only": True})
    return render(request, "saves/narrator/panel.html", context)


def _draft(game_save: Save, draft_id: int) -> NarratorDraft:
    return get_object_or_404(NarratorDraft.objects.prefetch_related("alternatives"), pk=draft_id, game_save=game_save)


def _number(request: HttpRequest) -> int | None:
    value = request.POST.get("number", "").strip()
    return int(value) if value.isdigit() else None


@require_POST
def narrate(request: HttpRequest, save_id: str) -> HttpResponse:
    """Open a draft for the player's action (shaped by its Do / Say / Story mode); stream it
    (htmx) or narrate it to its end."""
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    mode = request.POST.get("mode", "story")  # a request without a mode (a script, an older page): as written
    typed = request.POST.get("player_input", "")
    player_input = shape_action(typed, mode)
    accepted = None
    accept_id = request.POST.get("accept_draft", "").strip()
    if accept_id.isdigit():
        # Sending the next action accepts the narration above it (as a chat front end does).
        draft = _draft(game_save, int(accept_id))
        try:
            accepted = services.narrator_accept(
                draft=draft, number=_number(request), narrative=request.POST.get("narrative")
            )
        except services.TurnConflict as exc:
            return _console_answer(request, game_save, error=f"{exc.message} Nothing was appended.", action_text=typed)
        except services.NarratorError as exc:
            return _console_answer(request, game_save, error=str(exc), action_text=typed)
        except limits.Refused as exc:
            return _console_answer(
                request, game_save, error=f"Nothing was appended: the narrative {exc.message}", action_text=typed
            )
        game_save.refresh_from_db()
    if not player_input:
        if accepted is not None:
            return _console_answer(request, game_save, appended=accepted)
        return _console_answer(request, game_save, error="Type the player's action first.")
    try:
        check_player_input(player_input)
    except InvalidPlayerInput as exc:  # e.g. a NUL character: no draft is opened
        return _console_answer(request, game_save, error=str(exc), action_text=typed, appended=accepted)
    if not llm_connected():
        return _console_answer(request, game_save, error=services.NO_MODEL, action_text=typed, appended=accepted)
    draft = services.narrator_draft_create(game_save=game_save, player_input=player_input)
    if not request.htmx:
        services.narration_run(alternative_id=draft.alternatives.get(number=1).pk)
    return _console_answer(request, game_save, appended=accepted)


def _console_answer(
    request: HttpRequest, game_save: Save, *, error: str = "", action_text: str = "", appended=None
) -> HttpResponse:
    """Answer the whole Console (htmx: the story, the draft, the action box and the header's turn) or redirect."""
    if not request.htmx:
        if error:
            messages.error(request, error)
        elif appended is not None:
            messages.success(request, f"Turn {appended.turn_id} appended from the narrator.")
        if action_text:
            request.session["console_action_text"] = action_text
        return redirect("saves:detail", save_id=game_save.save_id)
    context = console_context(request, game_save)
    context.update({"narrator_error": error, "appended": appended})
    if action_text:
        context.update(action_text=action_text, action_mode="story")
    return render(request, "saves/console.html#console", context)


@require_POST
def narrator_stream(request: HttpRequest, save_id: str, draft_id: int, number: int) -> StreamingHttpResponse:
    """Stream one pending alternative's text as it is generated (text/plain, no markup)."""
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    alternative = get_object_or_404(_draft(game_save, draft_id).alternatives, number=number)
    response = StreamingHttpResponse(
        services.narration_stream(alternative_id=alternative.pk), content_type="text/plain; charset=utf-8"
    )
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # a proxy must pass each delta on at once
    return response


@require_GET
def narrator_draft(request: HttpRequest, save_id: str, draft_id: int) -> HttpResponse:
    """The narrator panel for a draft (what the page asks for once a stream has ended)."""
    game_save = save_for(user=request.user, save_id=save_id)
    draft = _draft(game_save, draft_id)
    if not request.htmx:
        return render(request, "saves/console.html", console_context(request, game_save))
    return _panel(request, game_save, draft=draft if draft.status == "open" else None)


@require_POST
def narrator_regenerate(request: HttpRequest, save_id: str, draft_id: int) -> HttpResponse:
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    draft = _draft(game_save, draft_id)
    try:
        if request.POST.get("with_findings"):  # the continuity guard's findings as instructions (docs/continuity.md)
            alternative = guard.regenerate_with_findings(
                draft=draft, number=_number(request) or draft.chosen_number, regenerate=services.narrator_regenerate
            )
        else:
            alternative = services.narrator_regenerate(draft=draft)
    except services.NarratorError as exc:
        return _panel(request, game_save, error=str(exc))
    if not request.htmx:
        services.narration_run(alternative_id=alternative.pk)
    return _panel(request, game_save, draft=_draft(game_save, draft_id))


@require_POST
def narrator_choose(request: HttpRequest, save_id: str, draft_id: int) -> HttpResponse:
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    draft = _draft(game_save, draft_id)
    try:
        services.narrator_choose(draft=draft, number=_number(request) or 0)
    except services.NarratorError as exc:
        return _panel(request, game_save, error=str(exc))
    return _panel(request, game_save, draft=_draft(game_save, draft_id))


@require_POST
def narrator_discard(request: HttpRequest, save_id: str, draft_id: int) -> HttpResponse:
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    draft = _draft(game_save, draft_id)
    services.narrator_discard(draft=draft)
    return _panel(
        request,
        game_save,
        note=f"Draft for turn {draft.turn_id} discarded; nothing was appended. "
        "It stays below (Bring it back) until the next turn is accepted.",
    )


@require_POST
def narrator_accept(request: HttpRequest, save_id: str, draft_id: int) -> HttpResponse:
    """Append the chosen (or edited) narration as the next turn; answer the whole console."""
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    draft = _draft(game_save, draft_id)
    narrative = request.POST.get("narrative")
    try:
        event = services.narrator_accept(draft=draft, number=_number(request), narrative=narrative)
    except services.TurnConflict as exc:
        return _panel(
            request,
            game_save,
            draft=draft,
            error=f"{exc.message} Nothing was appended: narrate again for the current turn.",
        )
    except services.NarratorError as exc:
        return _panel(request, game_save, draft=draft, error=str(exc))
    except limits.Refused as exc:
        return _panel(request, game_save, draft=draft, error=f"Nothing was appended: the narrative {exc.message}")
    game_save.refresh_from_db()
    return _console_answer(request, game_save, appended=event)


@require_GET
def narrator_prompt(request: HttpRequest, save_id: str) -> HttpResponse:
    """Preview the whole prompt the narrator would get for an action (nothing is sent)."""
    game_save = save_for(user=request.user, save_id=save_id)
    player_input = request.GET.get("input", "").strip()[: CONFIG.max_input_chars]
    context = save_page_context(request, game_save, "console")
    prompt, error = None, ""
    if player_input:
        try:
            prompt = build_narrator_prompt(game_save=game_save, player_input=player_input)
        except InvalidPlayerInput as exc:
            error = str(exc)
    context.update(
        {
            "player_input": player_input.replace("\x00", ""),
            "prompt": prompt,
            "prompt_error": error,
            "template_key": TEMPLATE_KEY,
            "default_instructions": DEFAULT_INSTRUCTIONS,
            "llm_connected": llm_connected(),
            "sampler": resolve_sampler(game_save=game_save),
        }
    )
    context["authors_note"], context["authors_note_depth"] = note_of(game_save)
    template = "saves/narrator/prompt.html#prompt" if request.htmx else "saves/narrator/prompt.html"
    # htmx swaps only 2xx answers: the fragment shows the error in place
    return render(request, template, context, status=400 if error and not request.htmx else 200)


@require_GET
def narrator_snapshot(request: HttpRequest, save_id: str, turn_id: int) -> HttpResponse:
    """What the narrator saw at turn N: prompt, memory context with reasons and cuts, usage, and
    what the prompt shares with the previous narrated turn's (a prefix cache)."""
    game_save = save_for(user=request.user, save_id=save_id)
    if not game_save.events.filter(turn_id=turn_id).exists():
        raise Http404("No such turn.")
    snapshot = NarratorSnapshot.objects.filter(game_save=game_save, turn_id=turn_id).first()
    context = save_page_context(request, game_save, "timeline")
    context.update({"turn_id": turn_id, "snapshot": snapshot})
    if snapshot is not None:
        context.update(snapshot_prefix_context(snapshot=snapshot))
    return render(request, "saves/narrator/snapshot.html", context)
