"""The chapters of a save in the JSON API: list, close the open chapter, edit or redo a summary.

Every rule is a service of `studio.memory.chapters` (the Chapters page calls the same ones);
a `ChapterError` (an empty open chapter, an edited summary asked to be redone, no model) is a
409 with its message. The request and response schemas live here (chapters only).
"""

from __future__ import annotations

from typing import Literal, Optional

from django.http import HttpRequest, JsonResponse

from ninja import Schema

from studio.api import schemas as S
from studio.api.errors import conflict, not_found
from studio.api.limited import limited
from studio.api.ninja_api import router
from studio.memory.chapters.models import Chapter
from studio.memory.chapters.selectors import chapter_settings, chapters_for, open_chapter_start
from studio.memory.chapters.services import ChapterError, chapter_close, chapter_summarize_again, chapter_summary_edit
from studio.saves.access import Access, save_for

READ_ERRORS = {400: S.Error, 401: S.Error, 404: S.Error, 503: S.Error}
WRITE_ERRORS = {**READ_ERRORS, 403: S.Error, 409: S.Error, 413: S.Error, 415: S.Error}
SAVE = "/saves/{str:save_id}"


class ChapterOut(Schema):
    id: int
    level: int
    kind: str
    first_turn: int
    last_turn: int
    closed_turn: int
    close_reason: Literal["playtester", "scene", "length", "rollup", "import"]
    close_note: str = ""
    story_time: str = ""
    summary: str = ""
    summary_status: Literal["pending", "done", "no_model", "failed", "empty"]
    summary_error: str = ""
    summary_model: str = ""
    edited: bool = False
    generated_summary: str = ""


class OpenChapter(Schema):
    first_turn: int
    current_turn: int


class ChapterSettingsOut(Schema):
    chapter_turns: int
    chapters_per_arc: int
    chapter_on_scene_change: bool
    chapter_min_turns: int


class ChapterList(Schema):
    items: list[ChapterOut]
    open_chapter: OpenChapter
    settings: ChapterSettingsOut


class ChapterCloseIn(Schema):
    note: Optional[limited("chapter.note")] = None


class ChapterSummaryIn(Schema):
    summary: limited("chapter.summary")


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


@router.get(
    SAVE + "/chapters",
    response={200: ChapterList, **READ_ERRORS},
    url_name="chapter_list",
    tags=["Chapters"],
    operation_id="listChapters",
    summary="The save's chapters and arcs in turn order, the open chapter, and the settings that close chapters.",
)
def chapter_list(request: HttpRequest, save_id: str):
    save = save_for(user=request.user, save_id=save_id)
    settings = chapter_settings(universe_meta=save.universe.meta_values())
    return JsonResponse(
        {
            "items": [chapter_json(c) for c in chapters_for(save)],
            "open_chapter": {"first_turn": open_chapter_start(save), "current_turn": save.current_turn},
            "settings": {
                "chapter_turns": settings.turns_per_chapter,
                "chapters_per_arc": settings.chapters_per_arc,
                "chapter_on_scene_change": settings.on_scene_change,
                "chapter_min_turns": settings.min_turns,
            },
        }
    )


@router.post(
    SAVE + "/chapters/close",
    response={201: ChapterOut, **WRITE_ERRORS},
    url_name="chapter_close",
    tags=["Chapters"],
    operation_id="closeChapter",
    summary="Close the open chapter at the current turn; its summary job is queued (409 when it has no turns).",
)
def chapter_close_view(request: HttpRequest, save_id: str, payload: ChapterCloseIn | None = None):
    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    try:
        chapter = chapter_close(game_save=save, note=(payload.note if payload else None) or "")
    except ChapterError as exc:
        raise conflict(str(exc)) from exc
    return JsonResponse(chapter_json(chapter), status=201)


@router.get(
    SAVE + "/chapters/{int:chapter_id}",
    response={200: ChapterOut, **READ_ERRORS},
    url_name="chapter_detail",
    tags=["Chapters"],
    operation_id="getChapter",
    summary="One chapter or arc.",
)
def chapter_detail(request: HttpRequest, save_id: str, chapter_id: int):
    save = save_for(user=request.user, save_id=save_id)
    return JsonResponse(chapter_json(_chapter_for(save, chapter_id)))


@router.patch(
    SAVE + "/chapters/{int:chapter_id}",
    response={200: ChapterOut, **WRITE_ERRORS},
    tags=["Chapters"],
    operation_id="editChapterSummary",
    summary='Set the playtester\'s summary: an override, marked edited, never regenerated over ("" removes it).',
)
def chapter_edit(request: HttpRequest, save_id: str, chapter_id: int, payload: ChapterSummaryIn):
    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    chapter = _chapter_for(save, chapter_id)
    try:
        chapter = chapter_summary_edit(chapter=chapter, text=payload.summary)
    except ChapterError as exc:
        raise conflict(str(exc)) from exc
    return JsonResponse(chapter_json(chapter))


@router.post(
    SAVE + "/chapters/{int:chapter_id}/summarize",
    response={200: ChapterOut, **WRITE_ERRORS},
    url_name="chapter_summarize",
    tags=["Chapters"],
    operation_id="summarizeChapter",
    summary="Queue a new summary (409 when a playtester edited it or no model is configured).",
)
def chapter_summarize(request: HttpRequest, save_id: str, chapter_id: int):
    save = save_for(user=request.user, save_id=save_id, access=Access.PLAY)
    try:
        chapter = chapter_summarize_again(chapter=_chapter_for(save, chapter_id))
    except ChapterError as exc:
        raise conflict(str(exc)) from exc
    return JsonResponse(chapter_json(chapter))
