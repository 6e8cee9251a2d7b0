"""The chapters of a save in the JSON API: list, close the open chapter, edit or redo a summary.

Every rule is a service of `studio.memory.chapters` (the console calls the same ones); a
`ChapterError` (an empty open chapter, an edited summary asked to be redone, no model) is a
409 with its message.
"""
from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from studio.api.errors import conflict, not_found
from studio.api.http import Params, api_view, json_body
from studio.memory.chapters.models import Chapter
from studio.memory.chapters.selectors import chapter_settings, chapters_for, open_chapter_start
from studio.memory.chapters.services import ChapterError, chapter_close, chapter_summarize_again, chapter_summary_edit
from studio.saves.access import Access, save_for


def chapter_json(chapter: Chapter) -> dict:
    return {
        "id": chapter.pk,
        "level": chapter.level,
        "kind": chapter.kind_label,
        "first_turn": chapter.first_turn,
        "last_turn": chapter.last_turn,
        "closed_turn": chapter.closed_turn,
        "close_reason": chapter.close_reason,
        "close_note": chapter.close_note,
        "story_time": chapter.story_time,
        "summary": chapter.summary,
        "summary_status": chapter.summary_status,
        "summary_error": chapter.summary_error,
        "summary_model": chapter.summary_model,
        "edited": chapter.edited,
        "generated_summary": chapter.generated_summary,
    }


def _chapter_for(save, chapter_id: int) -> Chapter:
    chapter = Chapter.objects.filter(game_save=save, pk=chapter_id).first()
    if chapter is None:
        raise not_found(f"Save {save.save_id} has no chapter {chapter_id}.")
    return chapter


@api_view("GET")
def chapter_list(request: HttpRequest, save_id: str) -> JsonResponse:
    """The save's chapters and arcs in turn order, the open chapter, and the settings that close them."""
    save = save_for(user=request.user, save_id=save_id)
    settings = chapter_settings(universe_meta=dict(save.universe.meta.values_list("key", "value")))
    return JsonResponse({
        "items": [chapter_json(c) for c in chapters_for(save)],
        "open_chapter": {"first_turn": open_chapter_start(save), "current_turn": save.current_turn},
        "settings": {"chapter_turns": settings.turns_per_chapter, "chapters_per_arc": settings.chapters_per_arc,
                     "chapter_on_scene_change": settings.on_scene_change, "chapter_min_turns": settings.min_turns},
    })


@api_view("POST")
def chapter_close_view(request: HttpRequest, save_id: str) -> JsonResponse:
    """Close the open chapter at the current turn (its summary job is queued); 409 when it is empty."""
    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    params = Params(json_body(request))
    note = params.string("note", max_length=300, default="") or ""
    params.done()
    try:
        chapter = chapter_close(game_save=save, note=note)
    except ChapterError as exc:
        raise conflict(str(exc)) from exc
    return JsonResponse(chapter_json(chapter), status=201)


@api_view("GET", "PATCH")
def chapter_detail(request: HttpRequest, save_id: str, chapter_id: int) -> JsonResponse:
    """GET one chapter; PATCH {"summary": "..."} sets the playtester's summary ("" removes the edit)."""
    if request.method == "GET":
        save = save_for(user=request.user, save_id=save_id)
        return JsonResponse(chapter_json(_chapter_for(save, chapter_id)))
    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    chapter = _chapter_for(save, chapter_id)
    params = Params(json_body(request))
    summary = params.string("summary", required=True, max_length=20_000)
    params.done()
    try:
        chapter = chapter_summary_edit(chapter=chapter, text=summary)
    except ChapterError as exc:
        raise conflict(str(exc)) from exc
    return JsonResponse(chapter_json(chapter))


@api_view("POST")
def chapter_summarize(request: HttpRequest, save_id: str, chapter_id: int) -> JsonResponse:
    """Queue a new summary of a chapter (409: edited by a playtester, or no model configured)."""
    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    try:
        chapter = chapter_summarize_again(chapter=_chapter_for(save, chapter_id))
    except ChapterError as exc:
        raise conflict(str(exc)) from exc
    return JsonResponse(chapter_json(chapter))
