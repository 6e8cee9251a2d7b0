"""The `chapters` section of the save file: chapters and arcs with their summaries.

One item per row (`studio.memory.chapters.models.Chapter`), deepest level last, in turn
order, every field but the ids and timestamps. Optional: a studio without chapters imports
the file without them (with a warning); its turns then form one open chapter. Each row's
turns must be turns of the file (1..current turn, first <= last), and two rows of one level
may not overlap.
"""

from __future__ import annotations

from typing import Iterator

from studio.memory.chapters.models import Chapter, ChapterCloseReason, SummaryStatus
from studio.memory.chapters.timeline import COPIED_FIELDS
from studio.saves.portable.registry import INVALID, CheckContext, ExportContext, ImportContext, SaveSection
from studio.saves.portable.sections.rows import _readers, insert_rows

NAME = "chapters"


def export_chapters(ctx: ExportContext) -> Iterator[dict]:
    rows = Chapter.objects.filter(game_save_id=ctx.game_save.pk).order_by("level", "first_turn")
    for row in rows:
        yield {name: getattr(row, name) for name in COPIED_FIELDS}


def check_chapters(items: list, ctx: CheckContext, where: str) -> list[dict]:
    r = _readers(ctx)
    c = ctx.checker

    def choice(values):
        return lambda value, loc: c.choice(value, loc, values)

    spec = {
        "level": r["int"](),
        "first_turn": r["turn"](first=1),
        "last_turn": r["turn"](first=1),
        "closed_turn": r["turn"](first=1),
        "close_reason": choice(ChapterCloseReason.values),
        "close_note": r["limited"]("chapter.note"),
        "story_time_start": r["text"](max_length=120),
        "story_time_end": r["text"](max_length=120),
        "summary": r["text"](),
        "summary_status": choice(SummaryStatus.values),
        "summary_error": r["text"](),
        "summary_model": r["text"](max_length=200),
        "edited": r["bool"](),
        "generated_summary": r["text"](),
    }
    cleaned = []
    spans: dict[int, list[tuple[int, int, str]]] = {}
    for loc, item in ctx.complete_records(items, where, spec):
        if item["edited"] and c.limited(item["summary"], f"{loc}.summary", "chapter.summary") is INVALID:
            continue  # a playtester's summary has the edit's limit (a model's is only bounded by its tokens)
        if not item["first_turn"] <= item["last_turn"] <= item["closed_turn"]:
            c.add(
                loc,
                f"turns must run first_turn <= last_turn <= closed_turn ({item['first_turn']}, "
                f"{item['last_turn']}, {item['closed_turn']})",
            )
            continue
        if item["level"] > 20:
            c.add(loc, f"level {item['level']} is deeper than 20")
            continue
        overlap = next(
            (o for o in spans.get(item["level"], []) if item["first_turn"] <= o[1] and o[0] <= item["last_turn"]), None
        )
        if overlap:
            c.add(
                loc,
                f"turns {item['first_turn']}-{item['last_turn']} overlap {overlap[2]} (turns {overlap[0]}-{overlap[1]}) of the same level",
            )
            continue
        spans.setdefault(item["level"], []).append((item["first_turn"], item["last_turn"], loc))
        cleaned.append(item)
    return cleaned


def load_chapters(items: list[dict], ctx: ImportContext) -> int:
    insert_rows(Chapter, ({"game_save_id": ctx.game_save.pk, **item} for item in items))
    return len(items)


SECTION = SaveSection(
    name=NAME,
    version=1,
    optional=True,
    export=export_chapters,
    check=check_chapters,
    load=load_chapters,
)
