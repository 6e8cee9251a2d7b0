"""Chapters in the timeline registry: a rewind to N re-opens the chapter holding N.

A chapter or arc is a turn *range*: a rewind to N deletes every row (any level) closed after
N (`closed_turn`; a scene change at N+1 closes a chapter ending at N), with its summary, so the chapter that holds N is open again (its
turns stay; it closes again as play goes on) and an arc holding N is gone until enough
chapters close again. Rows ending at or before N are untouched, so the chapters and
summaries after a rewind are exactly those recorded when the save stood at N. A fork copies
the rows closed at or before N (their summaries and edits as they are; a copied row whose
summary was still pending is re-queued by the fork's caller if a model is configured). The
save file carries them in its `chapters` section (`studio.saves.portable.sections.chapters`).
"""
from __future__ import annotations

from studio.memory import timeline
from studio.memory.chapters.models import Chapter

COPIED_FIELDS = ("level", "first_turn", "last_turn", "closed_turn", "close_reason", "close_note", "story_time_start", "story_time_end",
                 "summary", "summary_status", "summary_error", "summary_model", "edited", "generated_summary")


def rollback(save, n: int) -> dict[str, int]:
    deleted, _ = Chapter.objects.filter(game_save_id=save.pk, closed_turn__gt=n).delete()
    return {"chapters": deleted}


def count(save, n: int) -> dict[str, int]:
    return {"chapters": Chapter.objects.filter(game_save_id=save.pk, closed_turn__gt=n).count()}


def copy(ctx: timeline.ForkContext) -> None:
    rows = Chapter.objects.filter(game_save_id=ctx.source.pk, closed_turn__lte=ctx.target_turn).order_by("level", "first_turn")
    Chapter.objects.bulk_create([
        Chapter(game_save_id=ctx.fork.pk, **{name: getattr(row, name) for name in COPIED_FIELDS}) for row in rows
    ])


TABLE = timeline.TurnTable(
    name="chapters", model=Chapter, rollback=rollback, count=count, copy=copy, section="chapters", order=75,
    labels={"chapters": "Chapters and arcs (re-opened or dropped, with their summaries)"},
)


def register() -> None:
    timeline.register_table(TABLE)
