"""Rewind from the web (pick N -> preview -> confirm -> summary) and "fork from here"."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from studio.memory import timeline
from studio.saves.checkpoints import CheckpointManager, RewindError, TurnConflict
from studio.saves.forms import ForkForm, RewindForm
from studio.world.models import Save
from studio.saves.selectors import turns_removed_by
from studio.saves.access import Access, save_for
from studio.saves.views.saves import save_page_context

SUMMARY_SESSION_KEY = "rewind_summary"
# The vector store is not a table: its count has no timeline registration to carry a label.
VECTOR_LABELS = {"vector_chunks": "Memory chunks"}


def count_rows(counts: dict) -> list[dict]:
    """Return a rewind's counts as labelled rows, in a stable order (the labels are the
    timeline tables' own, `studio.memory.timeline.count_labels`)."""
    labels = {**timeline.count_labels(), **VECTOR_LABELS}
    return [
        {"kind": kind, "label": labels.get(kind, kind.replace("_", " ").capitalize()), "n": n}
        for kind, n in counts.items()
    ]


def _rewind_context(request: HttpRequest, game_save: Save, **extra) -> dict:
    context = save_page_context(request, game_save, "rewind")
    turn = request.GET.get("turn", "")
    initial = {"turn": turn} if turn.isdigit() else {}
    context.update(
        {
            "rewind_form": RewindForm(initial=initial, current_turn=game_save.current_turn),
            "fork_form": ForkForm(
                initial=initial or {"turn": game_save.current_turn}, current_turn=game_save.current_turn
            ),
        }
    )
    context.update(extra)
    return context


@require_GET
def rewind(request: HttpRequest, save_id: str) -> HttpResponse:
    """Step 1: pick the turn to rewind to (or to fork at)."""
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    return render(request, "saves/rewind.html", _rewind_context(request, game_save))


@require_GET
def rewind_preview(request: HttpRequest, save_id: str) -> HttpResponse:
    """Step 2: what a rewind to N would delete and which beliefs and mental models change."""
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    form = RewindForm(request.GET, current_turn=game_save.current_turn)
    preview = None
    if form.is_valid():
        preview = CheckpointManager().preview(game_save, form.cleaned_data["turn"])
    context = _rewind_context(request, game_save, **_preview_context(game_save, preview))
    context["rewind_form"] = form
    template = "saves/rewind.html#preview" if request.htmx else "saves/rewind.html"
    return render(request, template, context)


def _preview_context(game_save: Save, preview) -> dict:
    """What the preview shows: the counts, and the first lines of the turns it removes."""
    if preview is None:
        return {"preview": None, "preview_rows": []}
    removed = turns_removed_by(game_save=game_save, target_turn=preview.target_turn)
    return {
        "preview": preview,
        "preview_rows": count_rows(preview.counts),
        "removed_turns": removed,
        "removed_more": max(0, preview.from_turn - preview.target_turn - len(removed)),
    }


def _fresh(context: dict, game_save: Save) -> dict:
    """Mark an htmx answer to swap the page's turn-bound parts out of band (header, picker, fork)."""
    context.update(oob=True, pick_form=RewindForm(current_turn=game_save.current_turn))
    return context


def _confirm_refused(request: HttpRequest, game_save: Save, form: RewindForm) -> HttpResponse:
    """Show the preview again with the form's errors (the save as it is now)."""
    context = _rewind_context(request, game_save)
    context["rewind_form"] = form
    if request.htmx:
        _fresh(context, game_save)
    turn = getattr(form, "cleaned_data", {}).get("turn")
    if turn is not None:  # a valid turn: show its preview again, as the save is now
        context.update(_preview_context(game_save, CheckpointManager().preview(game_save, turn)))
    template = "saves/rewind.html#preview" if request.htmx else "saves/rewind.html"
    return render(request, template, context)


@require_POST
def rewind_confirm(request: HttpRequest, save_id: str) -> HttpResponse:
    """Step 3: do the rewind the preview showed, unless the save moved on since.

    The preview's turn (`from_turn`) goes to the rewind as the expected current turn, checked
    under the save's lock.
    """
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    form = RewindForm(request.POST, current_turn=game_save.current_turn)
    from_turn = request.POST.get("from_turn", "").strip()
    if not form.is_valid():
        return _confirm_refused(request, game_save, form)
    if not from_turn.isdigit():
        form.add_error(None, "The preview is missing from the request; check the preview again.")
        return _confirm_refused(request, game_save, form)
    if request.POST.get("confirm") != "yes":
        form.add_error(None, "Confirm the rewind to go on.")
        return _confirm_refused(request, game_save, form)
    try:
        result = CheckpointManager().rewind(game_save, form.cleaned_data["turn"], expected_current_turn=int(from_turn))
    except TurnConflict:
        game_save.refresh_from_db()
        form = RewindForm(request.POST, current_turn=game_save.current_turn)
        if form.is_valid():
            form.add_error(None, "The save changed since the preview was made; check the preview again.")
        return _confirm_refused(request, game_save, form)
    summary = {
        "save_id": result.save_id,
        "from_turn": result.from_turn,
        "target_turn": result.target_turn,
        "changed": result.changed,
        "message": result.message,
        "counts": result.counts,
        "count_rows": count_rows(result.counts),
        "vector_pending": result.vector_pending,
        "vector_error": result.vector_error,
        "db_ms": round(result.db_seconds * 1000, 1),
        "vector_ms": round(result.vector_seconds * 1000, 1),
    }
    request.session[SUMMARY_SESSION_KEY] = summary
    if request.htmx:
        game_save.refresh_from_db()
        context = _fresh(_rewind_context(request, game_save, summary=summary), game_save)
        return render(request, "saves/rewind.html#summary", context)
    return redirect("saves:rewind_summary", save_id=game_save.save_id)


@require_GET
def rewind_summary(request: HttpRequest, save_id: str) -> HttpResponse:
    """Step 4: what the last rewind of this save did (kept in the session)."""
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    summary = request.session.get(SUMMARY_SESSION_KEY)
    if not summary or summary.get("save_id") != game_save.save_id:
        summary = None
    context = _rewind_context(request, game_save, summary=summary, show_summary=True)
    template = "saves/rewind.html#summary" if request.htmx else "saves/rewind.html"
    return render(request, template, context)


@require_POST
def fork(request: HttpRequest, save_id: str) -> HttpResponse:
    """Copy the save as it stood at turn N into a new save; the original is untouched."""
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    form = ForkForm(request.POST, current_turn=game_save.current_turn)
    if form.is_valid():
        try:
            new_save = CheckpointManager().fork(
                game_save, form.cleaned_data["turn"], name=form.cleaned_data["name"] or None
            )
        except RewindError as exc:
            form.add_error("turn", str(exc))
        else:
            messages.success(request, f"Forked “{game_save.name}” at turn {new_save.fork_turn} into “{new_save.name}”.")
            url = reverse("saves:detail", kwargs={"save_id": new_save.save_id})
            if request.htmx:
                response = HttpResponse(status=204)
                response["HX-Redirect"] = url
                return response
            return redirect(url)
    context = _rewind_context(request, game_save)
    context["fork_form"] = form
    template = "saves/rewind.html#fork" if request.htmx else "saves/rewind.html"
    return render(request, template, context)
