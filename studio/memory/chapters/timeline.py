"""Chapters in the timeline registry: a rewind to N re-opens the chapter holding N.

A chapter or arc is a turn *range*: a rewind to N deletes every row (any level) closed after
N (`closed_turn`; a scene change at N+1 closes a chapter ending at N), with its summary, so
the chapter that holds N is open again (its turns stay; it closes again as play goes on) and
an arc holding N is gone until enough chapters close again. Rows ending at or before N are
untouched, so the chapters and summaries after a rewind are exactly those recorded when the
save stood at N. Appending a turn may close the open chapter (a scene change, the turn limit;
`chapter_after_turn`). A fork copies the rows closed at or before N, every column (their
summaries and edits as they are); a copied row whose summary was still pending gets its own
summary job in the fork (`requeue_pending`; without a configured model it is marked so). The
save file carries them in its `chapters` section (`studio.saves.portable.sections.chapters`).
"""

from __future__ import annotations

from studio.memory import timeline
from studio.memory.chapters.models import Chapter, SummaryStatus

# What a chapter row carries from one save to another (a fork, the save file, the demo's
# recording): every column but its id, its save and its times (`timeline.row_columns`).
COPIED_FIELDS = tuple(timeline.row_columns(Chapter, timestamps=False))


def append_chapter(turn: timeline.TurnAppend) -> None:
    from studio.memory.chapters.services import chapter_after_turn

    chapter_after_turn(
        game_save=turn.save, turn_id=turn.turn_id, state=turn.state, summarize=turn.options.get("summarize", True)
    )


def requeue_pending(ctx: timeline.ForkContext) -> None:
    """Queue the fork's own summary job for each copied chapter whose summary was pending at N."""
    from studio.memory.chapters.services import summaries_requeue

    summaries_requeue(
        game_save=ctx.fork,
        chapters=Chapter.objects.filter(game_save_id=ctx.fork.pk, summary_status=SummaryStatus.PENDING).order_by(
            "level", "first_turn"
        ),
    )


TABLE = timeline.TurnTable.plain(
    "chapters",
    Chapter,
    order=75,
    section="chapters",
    turn_field="closed_turn",
    label="Chapters and arcs (re-opened or dropped, with their summaries)",
    append=append_chapter,
    forked=requeue_pending,
)


def register() -> None:
    timeline.register_table(TABLE)
