"""Named time: the time expressions of a query as ranges of story time, and the ones that name none."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from studio.memory.chapters.named_time import named_time, names_a_time
from studio.memory.chapters.story_points import CALENDAR, DAY_COUNT, StoryPoint, calendar_date, story_point

NOW = StoryPoint(date=dt.date(2023, 10, 22))  # a Sunday


def days(query: str, now: StoryPoint | None = NOW) -> list[tuple[str | None, str | None]]:
    """The spans of `query` as ISO dates (None: open)."""
    found = named_time(query, now)
    assert found is not None, query
    out = []
    for span in found.spans:
        assert span.clock == CALENDAR
        out.append(tuple(None if v is None else dt.date.fromordinal(v).isoformat() for v in (span.start, span.end)))
    return out


@pytest.mark.parametrize(
    "query, expected",
    [
        ("What did Melanie do in May 2023?", ("2023-05-01", "2023-05-31")),
        ("what happened in May of 2022", ("2022-05-01", "2022-05-31")),
        ("on 8 May, 2023", ("2023-05-08", "2023-05-08")),
        ("on the 8th of May 2023", ("2023-05-08", "2023-05-08")),
        ("What painting did she show on October 13, 2023?", ("2023-10-13", "2023-10-13")),
        ("on 2023-05-08 at noon", ("2023-05-08", "2023-05-08")),
        ("What happened in 2021?", ("2021-01-01", "2021-12-31")),
        ("in the year 2020", ("2020-01-01", "2020-12-31")),
        ("in the summer of 2021", ("2021-06-01", "2021-08-31")),
        ("winter 2023", ("2022-12-01", "2023-02-28")),
    ],
)
def test_absolute_expressions(query, expected):
    assert days(query) == [expected]


@pytest.mark.parametrize(
    "query, expected",
    [
        ("yesterday", ("2023-10-21", "2023-10-21")),
        ("what did we say today", ("2023-10-22", "2023-10-22")),
        ("the day before yesterday", ("2023-10-20", "2023-10-20")),
        ("three days ago", ("2023-10-19", "2023-10-19")),
        ("2 weeks ago", ("2023-10-05", "2023-10-11")),
        ("a month ago", ("2023-09-01", "2023-09-30")),
        ("last week", ("2023-10-09", "2023-10-15")),
        ("this week", ("2023-10-16", "2023-10-22")),
        ("last month", ("2023-09-01", "2023-09-30")),
        ("last year", ("2022-01-01", "2022-12-31")),
        ("last winter", ("2022-12-01", "2023-02-28")),
        ("last summer", ("2023-06-01", "2023-08-31")),  # the latest summer that has ended
        ("in the autumn", ("2023-09-01", "2023-11-30")),  # the one under way
        ("in May", ("2023-05-01", "2023-05-31")),  # no year: the latest May not after now
        ("on 30 November", ("2022-11-30", "2022-11-30")),  # this year's is still to come
        ("last Monday", ("2023-10-16", "2023-10-16")),
        ("last weekend", ("2023-10-14", "2023-10-15")),
    ],
)
def test_relative_expressions_resolve_against_the_story_time(query, expected):
    assert days(query) == [expected]


def test_bounds_and_ranges():
    assert days("before May 2023") == [(None, "2023-04-30")]
    assert days("after May 2023") == [("2023-06-01", None)]
    assert days("since March") == [("2023-03-01", None)]
    assert days("until 8 May 2023") == [(None, "2023-05-08")]
    # The first date takes the second's year.
    assert days("Where was John between August 11 and August 15 2023?") == [("2023-08-11", "2023-08-15")]
    assert days("from June to August 2023") == [("2023-06-01", "2023-08-31")]


def test_two_expressions_are_both_kept_and_labelled():
    found = named_time("in May 2023 or in July 2023", NOW)
    assert [p for p in found.phrases] == ["May 2023", "July 2023"]
    assert found.label == "May 2023 (1 May 2023 – 31 May 2023); July 2023 (1 July 2023 – 31 July 2023)"
    assert found.holds(StoryPoint(date=dt.date(2023, 7, 4)))
    assert not found.holds(StoryPoint(date=dt.date(2023, 6, 4)))
    assert not found.holds(StoryPoint(day=4)) and not found.holds(None)


@pytest.mark.parametrize(
    "query",
    [
        "May I ask what happened at the docks?",
        "You may go now.",
        "It was the second time she came.",
        "The march of the dead began.",
        "2000 soldiers crossed the river.",
        "What did Melanie paint recently?",  # vague on purpose
        "Meet me at 8:30.",
        "Dec and Mar argue again.",  # names, not months
        "A summer dress, a winter coat.",
        "What happens next week?",  # memory holds no future
        "",
    ],
)
def test_phrases_that_name_no_time(query):
    assert named_time(query, NOW) is None
    assert not names_a_time(query)


def test_relative_expressions_need_a_story_time():
    assert names_a_time("three days ago")
    assert named_time("three days ago", None) is None
    assert named_time("in May", None) is None
    assert days("in May 2023", None) == [("2023-05-01", "2023-05-31")]  # absolute: no story time needed


def test_the_day_clock():
    now = StoryPoint(day=12)
    spans = named_time("yesterday", now).spans
    assert [(s.clock, s.start, s.end) for s in spans] == [(DAY_COUNT, 11, 11)]
    assert [(s.start, s.end) for s in named_time("three days ago", now).spans] == [(9, 9)]
    assert [(s.start, s.end) for s in named_time("last week", now).spans] == [(1, 7)]  # weeks of seven days from day 1
    assert [(s.start, s.end) for s in named_time("on day 5", None).spans] == [(5, 5)]
    assert [(s.start, s.end) for s in named_time("days 3 to 5", None).spans] == [(3, 5)]
    assert named_time("last month", now) is None  # months and years have no meaning on a day count
    assert named_time("in May 2023", now).holds(StoryPoint(day=5)) is False


@pytest.mark.parametrize(
    "state, expected",
    [
        ({"date": "1:56 pm on 8 May, 2023"}, StoryPoint(date=dt.date(2023, 5, 8))),
        ({"date": "2023-05-08"}, StoryPoint(date=dt.date(2023, 5, 8))),
        ({"date": "2023-05-08T14:00:00"}, StoryPoint(date=dt.date(2023, 5, 8))),
        ({"date": "May 8, 2023", "time": "dusk"}, StoryPoint(date=dt.date(2023, 5, 8))),
        ({"time": "1:56 pm on 8 May, 2023"}, StoryPoint(date=dt.date(2023, 5, 8))),
        ({"day": 12}, StoryPoint(day=12)),
        ({"day": "Day 3", "time": "dusk"}, StoryPoint(day=3)),
        ({"date": "8 May 2023", "day": "4"}, StoryPoint(date=dt.date(2023, 5, 8), day=4)),
        ({"date": "the 3rd of Frostmoot"}, None),
        ({"date": "31 February 2023"}, None),
        ({"time": "dusk"}, None),
        ({"day": True}, None),
        ({"day": "the third day"}, None),
        ({}, None),
        ("not a dict", None),
    ],
)
def test_story_point_of_a_state(state, expected):
    assert story_point(state) == expected


def test_calendar_date_needs_day_month_and_year():
    assert calendar_date("8 May") is None
    assert calendar_date("May 2023") is None
    assert calendar_date(20230508) is None


def test_times_off_the_calendar_name_nothing():
    early = StoryPoint(date=dt.date(50, 3, 1))
    assert named_time("999 years ago", early) is None
    assert named_time("3 days ago", StoryPoint(date=dt.date(1, 1, 2))) is None
    assert days("yesterday", StoryPoint(date=dt.date(1, 1, 2))) == [("0001-01-01", "0001-01-01")]


WORDS = [
    "in",
    "May",
    "may",
    "last",
    "winter",
    "2023",
    "8",
    "days",
    "ago",
    "before",
    "after",
    "between",
    "and",
    "yesterday",
    "week",
    "the",
    "of",
    "June",
    "day",
    "12",
    "this",
    "weekend",
    "Monday",
    "on",
    "summer",
    "a",
    "few",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(WORDS), max_size=8), st.dates(min_value=dt.date(2, 1, 1)), st.integers(-5, 10_000))
def test_any_text_gives_ordered_spans_or_nothing(words, today, day):
    found = named_time(" ".join(words), StoryPoint(date=today, day=day))
    for span in found.spans if found else ():
        assert span.start is None or span.end is None or span.start <= span.end, (words, span)
        assert found.label


def test_a_range_whose_ends_resolve_backwards_runs_forwards():
    # In March, "May" alone is last May: "between winter and May" is the winter before it, not this one.
    march = StoryPoint(date=dt.date(2023, 3, 1))
    found = named_time("between winter and May", march)
    assert (found.spans[0].start, found.spans[0].end) == (
        dt.date(2021, 12, 1).toordinal(),
        dt.date(2022, 5, 31).toordinal(),
    )
    # Relative ends are fixed points: written backwards, the range is still between them.
    backwards = named_time("from 3 days ago to 8 days ago", march)
    assert (backwards.spans[0].start, backwards.spans[0].end) == (
        dt.date(2023, 2, 21).toordinal(),
        dt.date(2023, 2, 26).toordinal(),
    )
