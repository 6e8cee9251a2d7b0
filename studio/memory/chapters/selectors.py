"""Reads of chapters: the open chapter, the closed ones, the settings that close them."""

from __future__ import annotations

from dataclasses import dataclass

from studio.memory.chapters.models import Chapter

TURNS_PER_CHAPTER_META = "chapter_turns"
CHAPTERS_PER_ARC_META = "chapters_per_arc"
SCENE_CHANGE_META = "chapter_on_scene_change"
MIN_TURNS_META = "chapter_min_turns"
# The turn-state keys whose change is a scene change (the location, as games record it).
SCENE_KEYS = ("location",)


@dataclass(frozen=True)
class ChapterSettings:
    """How a save's chapters close (Universe_Meta, read live like the narrator's meta).

    `turns_per_chapter` (`chapter_turns`, default 20; 0 turns the limit off): a chapter
    closes when it reaches that many turns. `chapters_per_arc` (`chapters_per_arc`, default
    4; 0 off): that many consecutive chapters (or arcs) roll up into an arc one level up.
    `on_scene_change` (`chapter_on_scene_change`, default on): a turn whose state's
    `location` differs from the previous turn's starts a new chapter, once the open chapter
    holds `min_turns` turns (`chapter_min_turns`, default 4: the demo changes place almost
    every turn, and one-turn chapters summarise nothing).
    """

    turns_per_chapter: int = 20
    chapters_per_arc: int = 4
    on_scene_change: bool = True
    min_turns: int = 4


def _int(value, default: int) -> int:
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        return default
    return number if 0 <= number <= 10_000 else default


def chapter_settings(*, universe_meta: dict[str, str]) -> ChapterSettings:
    """Return the chapter settings from the universe's meta rows (defaults where unset or invalid)."""
    default = ChapterSettings()
    scene = str(universe_meta.get(SCENE_CHANGE_META, "")).strip().lower()
    return ChapterSettings(
        turns_per_chapter=_int(universe_meta.get(TURNS_PER_CHAPTER_META), default.turns_per_chapter),
        chapters_per_arc=_int(universe_meta.get(CHAPTERS_PER_ARC_META), default.chapters_per_arc),
        on_scene_change=scene not in {"0", "false", "no", "off"},
        min_turns=_int(universe_meta.get(MIN_TURNS_META), default.min_turns),
    )


def open_chapter_start(game_save) -> int:
    """Return the first turn of the open chapter: the turn after the last closed chapter."""
    last = (
        Chapter.objects.filter(game_save_id=game_save.pk, level=0)
        .order_by("-last_turn")
        .values_list("last_turn", flat=True)
        .first()
    )
    return (last or 0) + 1


def open_chapter(game_save) -> tuple[int, int]:
    """Return the open chapter's number (the one it will have when it closes: closed chapters + 1) and first turn
    (`open_chapter_start`), in one query."""
    from django.db.models import Count, Max

    found = Chapter.objects.filter(game_save_id=game_save.pk, level=0).aggregate(
        closed=Count("pk"), last=Max("last_turn")
    )
    return found["closed"] + 1, (found["last"] or 0) + 1


def open_start_of(rows) -> int:
    """`open_chapter_start` from the save's rows (every level) a page already read: no query."""
    return max((row.last_turn for row in rows if row.level == 0), default=0) + 1


def chapter_number(chapter: Chapter) -> int:
    """Return the chapter's number among the rows of its level (chapter 3, arc 1), counted from the save's start."""
    return Chapter.objects.filter(
        game_save_id=chapter.game_save_id, level=chapter.level, first_turn__lte=chapter.first_turn
    ).count()


def arc_closed_with(chapter: Chapter) -> Chapter | None:
    """Return the arc (the highest level) that closing `chapter` completed, or None."""
    return (
        Chapter.objects.filter(
            game_save_id=chapter.game_save_id,
            level__gt=chapter.level,
            last_turn=chapter.last_turn,
            closed_turn=chapter.closed_turn,
        )
        .order_by("-level")
        .first()
    )


def chapters_for(game_save, *, max_turn: int | None = None):
    """Return the save's chapters and arcs (every level), in turn order, deepest level first at a tie."""
    rows = Chapter.objects.filter(game_save_id=game_save.pk)
    if max_turn is not None:
        rows = rows.filter(last_turn__lte=max_turn)
    return rows.order_by("first_turn", "-level")


MAX_GAPS_PER_QUERY = 32  # more turn ranges left to cover than this: one range query for the level, filtered here


def top_summaries(game_save, *, before_turn: int) -> list[Chapter]:
    """Return the summaries the story so far is told with, oldest first, the fewest rows that cover it.

    Each closed turn before `before_turn` is covered once, by the highest-level row holding
    it that has a summary (an arc rather than its chapters; an arc without one gives way to
    its parts). A chapter that nothing summarises is returned too: it says why it has none.

    Read level by level from the top (arcs nest: an arc is whole chapters, or whole arcs, of
    the level below), each level only inside the turn ranges the levels above left
    uncovered: a long save's thousands of chapters are read only where no arc tells them.
    """
    from django.db.models import Q

    rows = Chapter.objects.filter(game_save_id=game_save.pk, last_turn__lt=before_turn)
    # The highest level: an index walk from the top (game_save, level, last_turn), not an aggregate over the rows.
    top = rows.order_by("-level").values_list("level", flat=True).first()
    if top is None:
        return []
    chosen: list[Chapter] = []
    covered: list[tuple[int, int]] = []
    gaps = [(1, before_turn - 1)]  # turn ranges no chosen row covers yet
    for level in range(top, -1, -1):
        if not gaps:
            break
        found = rows.filter(level=level)
        # The rows starting inside a gap (arcs nest, so a row reaching into a gap starts in it): a range of the
        # (game_save, level, first_turn) index per gap.
        if len(gaps) <= MAX_GAPS_PER_QUERY:
            inside = Q()
            for first, last in gaps:
                inside |= Q(first_turn__gte=first, first_turn__lte=last)
            found = found.filter(inside)
        else:
            found = found.filter(first_turn__gte=gaps[0][0], first_turn__lte=gaps[-1][1])
        chosen_here = []
        for row in found.order_by("first_turn"):
            if (level and not row.has_summary) or any(
                first <= row.first_turn and row.last_turn <= last for first, last in covered
            ):
                continue  # an arc without a summary gives way to its parts: its range stays a gap
            chosen_here.append(row)
        chosen += chosen_here
        covered += [(row.first_turn, row.last_turn) for row in chosen_here]
        gaps = _minus(gaps, [(row.first_turn, row.last_turn) for row in chosen_here])
    return sorted(chosen, key=lambda r: r.first_turn)


def _minus(gaps: list[tuple[int, int]], covered: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Return the turn ranges of `gaps` (sorted, disjoint) that the sorted `covered` ranges leave."""
    out = []
    cuts = iter(covered)
    cut = next(cuts, None)
    for first, last in gaps:
        start = first
        while cut is not None and cut[1] < start:
            cut = next(cuts, None)
        while cut is not None and cut[0] <= last:
            if cut[0] > start:
                out.append((start, cut[0] - 1))
            start = max(start, cut[1] + 1)
            if cut[1] > last:
                break
            cut = next(cuts, None)
        if start <= last:
            out.append((start, last))
    return out
