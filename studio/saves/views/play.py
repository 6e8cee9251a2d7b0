"""The Console's play controls: opening turn, Continue, Impersonate, Undo / Retry / swipes of
the last turn, and the play settings (author's note, sampler).

Each is a form POST that works without JavaScript (then it redirects to the Console, a
narration runs to its end inside the POST) and answers htmx with the narrator panel or the
whole console. The services are in `studio/saves/narrator/play.py` (the opening turn in
`opening.py`, Impersonate in `impersonate.py`).
"""

from __future__ import annotations

import copy

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from studio.memory.llm import LLMError, SpendLimitExceeded
from studio.saves.access import Access, save_for
from studio.saves.errors import TurnConflict
from studio.saves.forms_play import PlaySettingsForm
from studio.saves.models import NarratorDraft, PlaySettings
from studio.world.models import Save
from studio.saves.narrator import impersonate, opening, play, services
from studio.saves.narrator.authors_note import play_settings_of
from studio.saves.narrator.play_settings import play_settings_update
from studio.saves.narrator.sampler import resolve_sampler
from studio.saves.narrator.selectors import llm_connected
from studio.saves.views.narrator import _draft, _panel
from studio.saves.views.saves import console_context, save_page_context


def _console(
    request: HttpRequest, game_save: Save, *, note: str = "", error: str = "", action_text: str = "", **extra
) -> HttpResponse:
    """Answer the whole console (htmx) or redirect to it with the note as a message."""
    if action_text:
        request.session["console_action_text"] = action_text  # the Console puts it in the action box
    if not request.htmx:
        if error:
            messages.error(request, error)
        elif note:
            messages.info(request, note)
        return redirect("saves:detail", save_id=game_save.save_id)
    game_save.refresh_from_db()
    context = console_context(request, game_save)
    context.update({"notice": note, "narrator_error": error, **extra})
    return render(request, "saves/console.html#console", context)


def _expected_turn(request: HttpRequest) -> int | None:
    value = request.POST.get("expected_turn", "").strip()
    return int(value) if value.isdigit() else None


@require_POST
def narrator_opening(request: HttpRequest, save_id: str) -> HttpResponse:
    """Turn 1 from the card's first message: a draft whose alternatives are the card's greetings."""
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    try:
        draft = opening.opening_draft_create(game_save=game_save)
    except play.PlayError as exc:
        return _panel(request, game_save, error=str(exc))
    return _panel(request, game_save, draft=_draft(game_save, draft.pk))


@require_POST
def narrator_continue(request: HttpRequest, save_id: str, draft_id: int) -> HttpResponse:
    """Extend the chosen narration of an open draft (a new alternative; the old one is kept)."""
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    draft = _draft(game_save, draft_id)
    if not llm_connected():
        return _panel(request, game_save, draft=draft, error=services.NO_MODEL)
    try:
        alternative = play.narrator_continue(draft=draft)
    except play.PlayError as exc:
        return _panel(request, game_save, draft=draft, error=str(exc))
    if not request.htmx:
        services.narration_run(alternative_id=alternative.pk)
    return _panel(request, game_save, draft=_draft(game_save, draft_id))


@require_POST
def narrator_stop(request: HttpRequest, save_id: str, draft_id: int, number: int) -> HttpResponse:
    """Stop a narration being written: the text shown so far stays on the draft, editable, never appended."""
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    draft = _draft(game_save, draft_id)
    alternative = draft.alternatives.filter(number=number).first()
    if alternative is None:
        return _panel(request, game_save, draft=draft, error=f"This draft has no alternative {number}.")
    stopped = services.narration_stop(alternative=alternative, shown_text=request.POST.get("shown_text", ""))
    note = "Stopped; nothing was appended." if stopped else "That narration had already ended."
    return _panel(request, game_save, draft=_draft(game_save, draft_id), note=note)


@require_POST
def narrator_impersonate(request: HttpRequest, save_id: str) -> HttpResponse:
    """The model writes the player's next action into the action box (nothing is appended)."""
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    mode = request.POST.get("mode", "do")
    try:
        result = impersonate.impersonate(game_save=game_save, mode=mode)
    except services.NoModelConnected as exc:
        return _console(request, game_save, error=str(exc))
    except SpendLimitExceeded as exc:
        return _console(request, game_save, error=f"Paused by the {exc.reason}")
    except LLMError as exc:
        return _console(request, game_save, error=f"The model could not write an action: {exc}")
    note = f"The model wrote this action ({result.latency_ms / 1000:.1f} s); edit it, then send it."
    # The model writes a whole sentence ("You ..."): the box sends it as Story so it is not shaped again.
    return _console(request, game_save, note=note, action_text=result.text)


@require_POST
def turn_undo(request: HttpRequest, save_id: str) -> HttpResponse:
    """Undo the last turn: a rewind by one; its action goes back into the action box."""
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    expected = _expected_turn(request)
    if expected is None:
        return _console(request, game_save, error="The page did not say which turn to undo; reload it.")
    try:
        player_input, result = play.last_turn_undo(game_save=game_save, expected_turn=expected)
    except TurnConflict:
        return _console(request, game_save, error="The save changed since this page was loaded; nothing was undone.")
    except play.PlayError as exc:
        return _console(request, game_save, error=str(exc))
    note = (
        f"Turn {expected} undone (rewound to turn {result.target_turn}); its action is back in the box. "
        f"Put turn {expected} back until the next turn is accepted."
    )
    return _console(request, game_save, note=note, action_text=player_input)


@require_POST
def turn_swipe(request: HttpRequest, save_id: str) -> HttpResponse:
    """Show another alternative as the last turn's text, in place: the turn is never removed."""
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    expected = _expected_turn(request)
    number = request.POST.get("number", "").strip()
    if expected is None or not number.isdigit():
        return _console(request, game_save, error="The page did not say which alternative to show; reload it.")
    try:
        play.last_turn_swipe(game_save=game_save, expected_turn=expected, number=int(number))
    except TurnConflict:
        return _console(request, game_save, error="The save changed since this page was loaded; nothing was changed.")
    except play.PlayError as exc:
        return _console(request, game_save, error=str(exc))
    return _console(request, game_save, note=f"Turn {expected} now reads as alternative {number}; its memory follows.")


@require_POST
def draft_restore(request: HttpRequest, save_id: str, draft_id: int) -> HttpResponse:
    """Bring back a discarded draft, or put back a turn Undo took (accepted again at once)."""
    from studio.saves.models import DraftStatus

    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    undone = NarratorDraft.objects.filter(pk=draft_id, game_save=game_save, status=DraftStatus.UNDONE).exists()
    try:
        draft = play.draft_restore(game_save=game_save, draft_id=draft_id)
    except play.PlayError as exc:
        return _console(request, game_save, error=str(exc))
    if not undone:
        return _console(request, game_save, note=f"The draft for turn {draft.turn_id} is back; choose, then accept it.")
    try:
        services.narrator_accept(draft=_draft(game_save, draft.pk), number=draft.chosen_number)
    except (TurnConflict, services.NarratorError) as exc:
        return _console(
            request, game_save, error=f"{getattr(exc, 'message', exc)} The turn is a draft again: accept it from there."
        )
    return _console(
        request, game_save, note=f"Turn {draft.turn_id} is back, as it was; its memory jobs are queued again."
    )


@require_POST
def turn_retry(request: HttpRequest, save_id: str) -> HttpResponse:
    """Retry / swipe / continue the last turn: it becomes a draft again, its alternatives kept."""
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    expected = _expected_turn(request)
    then = request.POST.get("then", "retry")
    if then not in ("", "retry", "continue", "swipe"):
        then = "retry"
    then = "" if then == "swipe" else then
    if expected is None:
        return _console(request, game_save, error="The page did not say which turn to retry; reload it.")
    if then and not llm_connected():
        return _console(request, game_save, error=services.NO_MODEL)
    try:
        draft = play.last_turn_reopen(game_save=game_save, expected_turn=expected, then=then)
    except TurnConflict:
        return _console(request, game_save, error="The save changed since this page was loaded; nothing was changed.")
    except play.PlayError as exc:
        return _console(request, game_save, error=str(exc))
    if then and not request.htmx:
        services.narration_run(alternative_id=draft.alternatives.get(number=draft.chosen_number).pk)
    what = {
        "retry": "a new alternative is being written",
        "continue": "its continuation is being written",
        "": "choose an alternative, then accept it",
    }[then]
    return _console(
        request,
        game_save,
        note=(
            f"Turn {expected} is a draft again (rewound by one: its memory is rebuilt when you accept): {what}. "
            "Its accepted text is kept among the alternatives (← →), and a discarded draft can be brought back "
            "until the next turn is accepted."
        ),
    )


@require_http_methods(["GET", "POST"])
def play_settings(request: HttpRequest, save_id: str) -> HttpResponse:
    """The save's author's note and sampler overrides (GET shows the form, POST saves it)."""
    game_save = save_for(
        user=request.user, save_id=save_id, access=Access.PLAY if request.method == "POST" else Access.READ
    )
    row = play_settings_of(game_save)  # one read: the page and the sampler below use the same row
    saved = False
    if request.method == "POST":
        # The form edits a copy: a refused form leaves the row the page shows as it is saved.
        form = PlaySettingsForm(
            request.POST, instance=copy.copy(row) if row else PlaySettings(game_save_id=game_save.pk)
        )
        if form.is_valid():
            # Only what this page changed, under the save's lock: a change made meanwhile elsewhere stays.
            play_settings_update(game_save=game_save, changes=form.changes())
            saved = True
            if not request.htmx:
                messages.success(request, "Play settings saved; the next narration uses them.")
                return redirect("saves:detail", save_id=game_save.save_id)
    else:
        form = PlaySettingsForm(instance=row or PlaySettings(game_save_id=game_save.pk))
    context = save_page_context(request, game_save, "console")
    context.update({"settings_form": form, "sampler": resolve_sampler(game_save=game_save), "settings_saved": saved})
    template = "saves/narrator/settings.html#settings" if request.htmx else "saves/narrator/settings.html"
    return render(request, template, context)
