"""The story so far read level by level: the same summaries as reading every chapter, without reading them all."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import given, settings
from hypothesis import strategies as st

from studio.memory.chapters.models import Chapter, ChapterCloseReason, SummaryStatus
from studio.memory.chapters.selectors import top_summaries

pytestmark = pytest.mark.django_db


def every_row_reference(game_save, *, before_turn: int) -> list[int]:
    """The rule as first written: every closed row read, the highest level with a summary wins."""
    rows = list(
        Chapter.objects.filter(game_save_id=game_save.pk, last_turn__lt=before_turn).order_by("-level", "first_turn")
    )
    chosen, covered = [], []
    for row in rows:
        if (row.level and not row.has_summary) or any(a <= row.first_turn and row.last_turn <= b for a, b in covered):
            continue
        chosen.append(row)
        covered.append((row.first_turn, row.last_turn))
    return [row.pk for row in sorted(chosen, key=lambda r: r.first_turn)]


def build(game_save, lengths: list[int], summarised: list[bool]) -> int:
    """Chapters of `lengths` turns, arcs of 4 at every level as `_roll_up` closes them; return the last turn."""
    Chapter.objects.filter(game_save=game_save).delete()
    flags = iter(summarised * (2 * len(lengths) // len(summarised) + 2))
    level_rows, first = [], 1
    for length in lengths:
        level_rows.append((first, first + length - 1))
        first += length
    level = 0
    while level_rows:
        Chapter.objects.bulk_create(
            [
                Chapter(
                    game_save=game_save,
                    level=level,
                    first_turn=a,
                    last_turn=b,
                    closed_turn=b,
                    close_reason=ChapterCloseReason.LENGTH if level == 0 else ChapterCloseReason.ROLLUP,
                    summary="told" if next(flags) else "",
                    summary_status=SummaryStatus.DONE,
                )
                for a, b in level_rows
            ]
        )
        level_rows = [(level_rows[i][0], level_rows[i + 3][1]) for i in range(0, len(level_rows) - 3, 4)]
        level += 1
    return first - 1


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 6), min_size=0, max_size=40),
    summarised=st.lists(st.booleans(), min_size=1, max_size=9),
    cut=st.integers(0, 260),
)
def test_level_by_level_gives_what_every_row_gives(game_save, lengths, summarised, cut):
    last = build(game_save, lengths, summarised)
    for before in {1, min(cut, last + 1), last + 1}:
        assert [r.pk for r in top_summaries(game_save, before_turn=before)] == every_row_reference(
            game_save, before_turn=before
        )


def test_a_long_save_reads_the_arcs_not_its_chapters(game_save):
    last = build(game_save, [20] * 1024, [True])  # 1,024 chapters, arcs on 5 levels above them
    with CaptureQueriesContext(connection) as queries:
        rows = top_summaries(game_save, before_turn=last + 1)
    assert [(r.level, r.first_turn, r.last_turn) for r in rows] == [(5, 1, last)]
    assert len(queries) <= 3, [q["sql"] for q in queries]
    chapters = build(game_save, [20] * 1027, [True])  # three chapters not yet in an arc
    rows = top_summaries(game_save, before_turn=chapters + 1)
    assert [(r.level, r.first_turn) for r in rows] == [(5, 1), (0, 20481), (0, 20501), (0, 20521)]


@settings(max_examples=40, deadline=None)
@given(turns=st.lists(st.integers(1, 120), max_size=90))
def test_turns_read_by_runs_are_the_turns_asked(game_save, turns):
    """`turns_q` reads runs of consecutive turns by their bounds: the same rows as a list of every turn."""
    from studio.memory.chapters.story import turn_texts
    from studio.memory.turn_rows import turns_q
    from studio.world.models import Event

    if not Event.objects.filter(game_save=game_save, turn_id=100, narrative="turn 100").exists():
        Event.objects.filter(game_save=game_save).delete()
        Event.objects.bulk_create([Event(game_save=game_save, turn_id=n, narrative=f"turn {n}") for n in range(1, 101)])
    rows = Event.objects.filter(game_save=game_save)
    assert sorted(rows.filter(turns_q(turns)).values_list("turn_id", flat=True)) == sorted(
        rows.filter(turn_id__in=turns).values_list("turn_id", flat=True)
    )
    assert turn_texts(game_save, turns) == {n: f"turn {n}" for n in set(turns) if n <= 100}


def test_the_guards_last_turns_are_two_bounds_not_two_thousand_parameters(game_save):
    from studio.memory.turn_rows import turns_q
    from studio.world.models import Event

    _sql, params = Event.objects.filter(turns_q(range(1, 2001))).query.sql_with_params()
    assert list(params) == [1, 2000]
