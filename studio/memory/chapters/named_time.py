"""Named time: the time a query names ("in May 2023", "three days ago", "last winter"), as a range of story time.

Two clocks, because games keep story time two ways (`story_time.py`):
- **calendar**: a turn whose `date` (or a `time` holding a date) reads as a calendar day:
  ISO ("2023-05-08", "2023-05-08T14:00"), day-month-year ("8 May, 2023", "8th of May 2023",
  LoCoMo's "1:56 pm on 8 May, 2023") or month-day-year ("May 8, 2023");
- **day count**: a turn whose `day` is a number (3, "3", "Day 3").
`story_point(state)` (`story_points.py`) reads a turn's state into a `StoryPoint` (either
clock, or both, or None: "the 3rd of Frostmoot" has no calendar here, and a turn without story
time has none).

`named_time(query, now)` finds the time expressions of a query and returns a `NamedTime`:
their spans on either clock (a turn is inside when its point falls in any span) and a label
("May 2023 (1 May 2023 – 31 May 2023)"). Absolute expressions need no `now`; relative ones
are resolved against `now`, the save's current story time (its latest turn's point), and
are dropped without it. Understood (case-insensitive unless said):
- a day: "2023-05-08", "8 May 2023", "on 8 May", "May 8th, 2023", "the 8th of May";
  without a year, the latest such day not after `now`;
- a month: "May 2023", "May of 2023"; "in May", "during June", "last May", "this May",
  "early/mid/late May" (a bare month needs one of those words before it, and "May" alone
  must be capitalised: "May I ask" and "you may" name no time);
- a year: "in 2023", "during 2023", "the year 2023" (a bare number is a count, not a year);
- a season (northern meteorological: winter = December to February, named by the year of
  its January): "summer 2021", "the summer of 2021", "in the winter", "last winter", "this
  spring" ("fall" and "autumn" alike);
- relative days: "today", "tonight", "this morning / afternoon / evening", "earlier today",
  "yesterday", "last night", "the day before yesterday", "N days / weeks / months / years
  ago" (N in digits or words, "a", "a couple of", "a few", "several"), "last / this week",
  "last / this month", "last / this year", "the past week / month / year", "last / this /
  on Monday", "last / this weekend";
- a day count: "day 12", "on day 3", "days 3 to 5"; on the day clock "yesterday", "N days /
  weeks ago", "last / this week" (weeks of seven days from day 1) resolve too, months and
  years do not;
- a bound: "before X", "after X", "since X", "until / till / by X", "between X and Y",
  "from X to Y" for any X and Y above ("between August 11 and August 15 2023": X takes Y's
  year).
Not understood on purpose: "recently", "the other day", "soon", "next week" (memory holds no
future), numeric dates ("8/5/2023": day-month or month-day?), weekday names alone.

The expressions themselves (their patterns, resolvers and the scan of a query) are in
time_expressions.py; this module puts what they find together: bounds, "between X and Y",
the label.

Pure (no Django); the save's turns are read by `studio.memory.recall.temporal`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from studio.memory.chapters.story_points import CALENDAR, Span, StoryPoint
from studio.memory.chapters.time_expressions import _WORD_BEFORE, _find, _Found, _word_before

BOUNDS = {"before", "after", "since", "until", "till", "by"}


@dataclass(frozen=True)
class NamedTime:
    """The time a query names: spans (a turn is inside when any holds its point) and a label."""

    spans: tuple[Span, ...]
    phrases: tuple[str, ...]

    @property
    def label(self) -> str:
        return "; ".join(f"{phrase} ({span.describe()})" for phrase, span in zip(self.phrases, self.spans))

    def holds(self, point: StoryPoint | None) -> bool:
        return point is not None and any(span.holds(point) for span in self.spans)


def _bounded(span: Span, bound: str) -> Span:
    """Apply "before / after / since / until X" to X's span."""
    if bound == "before":
        return Span(span.clock, None, None if span.start is None else span.start - 1)
    if bound == "after":
        return Span(span.clock, None if span.end is None else span.end + 1, None)
    if bound == "since":
        return Span(span.clock, span.start, None)
    return Span(span.clock, None, span.end)  # until, till, by


_FIRST_DAY, _LAST_DAY = dt.date.min.toordinal(), dt.date.max.toordinal()


def _resolved(item: _Found, now: StoryPoint | None, default_year: int | None) -> Span | None:
    """Resolve one expression; None when it cannot be, or falls off the calendar ("999 years ago" in year 50)."""
    try:
        span = item.resolve(now, default_year)
    except (ValueError, OverflowError):
        return None
    if (
        span is not None
        and span.clock == CALENDAR
        and any(value is not None and not _FIRST_DAY <= value <= _LAST_DAY for value in (span.start, span.end))
    ):
        return None
    return span


def named_time(query: str, now: StoryPoint | None) -> NamedTime | None:
    """Return the time `query` names, resolved against `now` (the save's story time), or None."""
    if not isinstance(query, str) or not query.strip():
        return None
    found = _find(query)
    spans: list[Span] = []
    phrases: list[str] = []
    index = 0
    while index < len(found):
        item = found[index]
        before = _word_before(query, item.start)
        following = found[index + 1] if index + 1 < len(found) else None
        joined = (
            following is not None
            and before in ("between", "from")
            and query[item.end : following.start].strip().lower() in ("and", "to", "until", "till", "-", "–", "through")
        )
        if joined:
            second = _resolved(following, now, None)
            default_year = None
            if second is not None and second.clock == CALENDAR and following.has_year and not item.has_year:
                default_year = dt.date.fromordinal(second.end).year
            first = _resolved(item, now, default_year)
            if first is not None and second is not None and first.clock == second.clock:
                spans.append(_joined(item, first, second, now))
                phrases.append(query[_phrase_start(query, item.start) : following.end].strip())
            index += 2
            continue
        span = _resolved(item, now, None)
        if span is not None:
            if before in BOUNDS:
                span = _bounded(span, before)
                phrases.append(query[_phrase_start(query, item.start) : item.end].strip())
            else:
                phrases.append(item.text)
            spans.append(span)
        index += 1
    if not spans:
        return None
    return NamedTime(spans=tuple(spans), phrases=tuple(phrases))


def _joined(item: _Found, first: Span, second: Span, now: StoryPoint | None) -> Span:
    """The span from `first` to `second`, in time order.

    Each end resolves on its own to its latest occurrence, so "between winter and May" in March
    gives this winter and last May. A first end that recurs (a month, a season, a weekday) without a
    year of its own then means its occurrence before the second (the winter before last May); ends that still run
    backwards ("from 3 days ago to 8 days ago", "between 2023 and 2021") span both, earliest first.
    """
    if (
        first.start is not None
        and second.end is not None
        and first.start > second.end
        and first.clock == CALENDAR
        and item.recurs
        and not item.has_year
    ):
        earlier = _resolved(item, StoryPoint(date=dt.date.fromordinal(second.end), day=now.day if now else None), None)
        if earlier is not None and earlier.start is not None and earlier.start <= second.end:
            first = earlier
    if first.start is not None and second.end is not None and first.start > second.end:
        starts = [v for v in (first.start, second.start) if v is not None]
        return Span(first.clock, min(starts) if starts else None, max(first.end or second.end, second.end))
    return Span(first.clock, first.start, second.end)


def _phrase_start(query: str, start: int) -> int:
    """Where the word before `start` begins (to quote "before May 2023" whole)."""
    match = _WORD_BEFORE.search(query[:start])
    return match.start(1) if match else start


def names_a_time(query: str) -> bool:
    """Whether the query holds a time expression at all (before any story time is read)."""
    return isinstance(query, str) and bool(query.strip()) and bool(_find(query))
