"""The Chapters page: a save's chapters and arcs as bands over its turns, their summaries;
the Console's Close chapter button.

Reading is open to whoever may read the save; closing the open chapter, editing a summary
(an override, marked edited) and asking for a new summary need the playtester role. Every
rule is a service of `studio.memory.chapters`; a `ChapterError` becomes a message on the
page. POSTs from the Chapters page redirect back (htmx or not: the page is small). The
Console's close (`next=console`) carries the turn its button names (`expected_turn`: nothing
is closed if the save moved since) and answers htmx with the Console's chapter card, saying
what happened; without htmx it redirects to the Console with that message.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from studio.memory.chapters.models import Chapter, SummaryStatus
from studio.memory.chapters.selectors import (
    arc_closed_with,
    chapter_number,
    chapter_settings,
    chapters_for,
    open_chapter_start,
)
from studio.memory.chapters.services import ChapterError, chapter_close, chapter_summarize_again, chapter_summary_edit
from studio.saves.access import Access, save_for
from studio.saves.narrator.selectors import llm_connected
from studio.saves.views.saves import console_chapter, save_page_context


def _bands(game_save, rows) -> list[dict]:
    """Each row as a band: where it starts and how wide it is, in percent of the save's turns."""
    total = max(game_save.current_turn, 1)
    return [
        {
            "row": row,
            "left": round((row.first_turn - 1) * 100 / total, 2),
            "width": max(round((row.last_turn - row.first_turn + 1) * 100 / total, 2), 0.5),
        }
        for row in rows
    ]


def chapter_band_levels(game_save, rows) -> list[dict]:
    """The rows as band rows for `saves/_chapter_bands.html`: one per level, the highest first."""
    levels = sorted({row.level for row in rows}, reverse=True)
    return [{"level": level, "bands": _bands(game_save, [r for r in rows if r.level == level])} for level in levels]


@require_GET
def chapters(request: HttpRequest, save_id: str) -> HttpResponse:
    game_save = save_for(user=request.user, save_id=save_id)
    rows = list(chapters_for(game_save))
    context = save_page_context(request, game_save, "chapters")
    context.update(
        {
            "rows": rows,
            "band_levels": chapter_band_levels(game_save, rows),
            "open_start": open_chapter_start(game_save),
            "settings": chapter_settings(universe_meta=game_save.universe.meta_values()),
        }
    )
    return render(request, "saves/chapters.html", context)


def close_message(chapter: Chapter) -> str:
    """Say what closing `chapter` did: its number and turns, its summary's fate, the arc it completed."""
    summary = {
        SummaryStatus.PENDING: "its summary is queued",
        SummaryStatus.NO_MODEL: "no summary will be made: no model is connected (AXIOM_LLM_BASE_URL)",
    }.get(chapter.summary_status, chapter.get_summary_status_display().lower())
    text = (
        f"Chapter {chapter_number(chapter)} (turns {chapter.first_turn}–{chapter.last_turn}) closed at turn "
        f"{chapter.last_turn}; {summary}."
    )
    arc = arc_closed_with(chapter)
    if arc is not None:
        text += f" It completes arc {chapter_number(arc)} (turns {arc.first_turn}–{arc.last_turn})."
    return text


def _expected_turn(request: HttpRequest) -> int | None:
    value = request.POST.get("expected_turn", "").strip()
    return int(value) if value.isdigit() else None


@require_POST
def chapter_close_view(request: HttpRequest, save_id: str) -> HttpResponse:
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    on_console = request.POST.get("next") == "console"
    note = error = ""
    try:
        chapter = chapter_close(
            game_save=game_save,
            note=request.POST.get("note", ""),
            expected_turn=_expected_turn(request) if on_console else None,
        )
    except ChapterError as exc:
        error = str(exc)
    else:
        note = close_message(chapter)
    if on_console and request.htmx:
        game_save.refresh_from_db()
        context = save_page_context(request, game_save, "console")
        context.update(
            {
                "chapter": console_chapter(game_save),
                "chapter_note": note,
                "chapter_error": error,
                "llm_connected": llm_connected(),
            }
        )
        return render(request, "saves/console.html#chapter", context)
    if error:
        messages.error(request, error)
    else:
        messages.success(request, note)
    return redirect("saves:detail" if on_console else "saves:chapters", save_id=game_save.save_id)


@require_POST
def chapter_edit(request: HttpRequest, save_id: str, chapter_id: int) -> HttpResponse:
    game_save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    chapter = get_object_or_404(Chapter, game_save=game_save, pk=chapter_id)
    try:
        if request.POST.get("action") == "summarize":
            chapter_summarize_again(chapter=chapter)
            messages.success(request, f"A new summary of turns {chapter.first_turn}-{chapter.last_turn} is queued.")
        else:
            chapter = chapter_summary_edit(chapter=chapter, text=request.POST.get("summary", ""))
            messages.success(
                request,
                "Summary saved (marked edited: no job writes over it)." if chapter.edited else "Your edit was removed.",
            )
    except ChapterError as exc:
        messages.error(request, str(exc))
    return redirect("saves:chapters", save_id=game_save.save_id)
