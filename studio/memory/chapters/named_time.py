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

Pure (no Django); the save's turns are read by `studio.memory.recall.temporal`.
"""

from __future__ import annotations

import calendar
import datetime as dt
import functools
import re
from dataclasses import dataclass
from typing import Callable

from studio.memory.chapters.story_points import (
    _DAY,
    _ISO,
    _MONTH_NAME,
    _YEAR,
    CALENDAR,
    DAY_COUNT,
    MONTH_ABBREVIATIONS,
    Span,
    StoryPoint,
    _make_date,
    _month_number,
)

WEEKDAYS = {name.lower(): number for number, name in enumerate(calendar.day_name)}
# Season -> (first month, months long); winter starts in December of the year before its January.
SEASONS = {"winter": (12, 3), "spring": (3, 3), "summer": (6, 3), "autumn": (9, 3), "fall": (9, 3)}
NUMBER_WORDS = {
    "a": (1, 1),
    "an": (1, 1),
    "one": (1, 1),
    "two": (2, 2),
    "three": (3, 3),
    "four": (4, 4),
    "five": (5, 5),
    "six": (6, 6),
    "seven": (7, 7),
    "eight": (8, 8),
    "nine": (9, 9),
    "ten": (10, 10),
    "eleven": (11, 11),
    "twelve": (12, 12),
    "a couple of": (2, 2),
    "a few": (2, 4),
    "several": (3, 6),
}
# Words before a bare month, season or year that make it a time ("in May", not "May I").
TIME_PREPOSITIONS = {
    "in",
    "during",
    "of",
    "since",
    "before",
    "after",
    "until",
    "till",
    "by",
    "through",
    "throughout",
    "from",
    "between",
    "and",
    "to",
    "on",
    "early",
    "mid",
    "late",
}
BOUNDS = {"before", "after", "since", "until", "till", "by"}

_COUNT = (
    r"(?P<count>\d{1,3}|a couple of|a few|several|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
)
_SEASON = r"(?P<season>winter|spring|summer|autumn|fall)"
_WEEKDAY = r"(?P<weekday>monday|tuesday|wednesday|thursday|friday|saturday|sunday)"


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


# --- Calendar arithmetic ---------------------------------------------------------------------


def _month_span(year: int, month: int) -> Span:
    first = dt.date(year, month, 1)
    last = dt.date(year, month, calendar.monthrange(year, month)[1])
    return Span(CALENDAR, first.toordinal(), last.toordinal())


def _months_span(year: int, month: int, length: int) -> Span:
    """`length` months from (year, month)."""
    end_index = year * 12 + month - 1 + length - 1
    start = _month_span(year, month).start
    return Span(CALENDAR, start, _month_span(end_index // 12, end_index % 12 + 1).end)


def _add_months(year: int, month: int, delta: int) -> tuple[int, int]:
    index = year * 12 + month - 1 + delta
    return index // 12, index % 12 + 1


def _day_span(day: dt.date) -> Span:
    return Span(CALENDAR, day.toordinal(), day.toordinal())


def _season_span(season: str, year: int) -> Span:
    """The season whose January (winter) or months fall in `year`."""
    first_month, length = SEASONS[season]
    return _months_span(year - 1 if first_month == 12 else year, first_month, length)


def _latest(spans_by_year: Callable[[int], Span], now: dt.date, *, ended: bool) -> Span:
    """The latest of a yearly span that started on or before `now` (`ended`: that ended before it)."""
    limit = now.toordinal()
    for year in range(now.year + 1, now.year - 3, -1):
        span = spans_by_year(year)
        if (span.end < limit) if ended else (span.start <= limit):
            return span
    return spans_by_year(now.year - 3)


def _week_start(day: dt.date) -> dt.date:
    return day - dt.timedelta(days=day.weekday())


# --- The expressions -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Found:
    """One expression found in a query, before it is resolved."""

    start: int
    end: int
    text: str
    resolve: Callable[[StoryPoint | None, int | None], Span | None]
    has_year: bool = True
    recurs: bool = False  # a month, season, day of a month or weekday: it has an occurrence every year (week)


def _year_of(match: re.Match) -> int | None:
    return int(match["year"]) if match.groupdict().get("year") else None


def _on_calendar(now: StoryPoint | None) -> dt.date | None:
    return now.date if now is not None else None


def _a_day(match: re.Match) -> Callable:
    month, day, year = _month_number(match["month"]), int(match["day"]), _year_of(match)

    def resolve(now: StoryPoint | None, default_year: int | None) -> Span | None:
        if year or default_year:
            found = _make_date(year or default_year, month, day)
            return _day_span(found) if found else None
        today = _on_calendar(now)
        if today is None:
            return None
        for candidate_year in (today.year, today.year - 1):
            found = _make_date(candidate_year, month, day)
            if found and found <= today:
                return _day_span(found)
        return None

    return resolve


def _iso_day(match: re.Match) -> Callable:
    found = _make_date(int(match["year"]), int(match["month"]), int(match["day"]))
    return lambda now, default_year: _day_span(found) if found else None


def _a_month(match: re.Match) -> Callable:
    month, year = _month_number(match["month"]), _year_of(match)
    relation = (match.groupdict().get("relation") or "").lower()

    def resolve(now: StoryPoint | None, default_year: int | None) -> Span | None:
        if year or default_year:
            return _month_span(year or default_year, month)
        today = _on_calendar(now)
        if today is None:
            return None
        return _latest(lambda y: _month_span(y, month), today, ended=relation == "last")

    return resolve


def _a_year(match: re.Match) -> Callable:
    year = int(match["year"])
    return lambda now, default_year: Span(CALENDAR, dt.date(year, 1, 1).toordinal(), dt.date(year, 12, 31).toordinal())


def _a_season(match: re.Match) -> Callable:
    season, year = match["season"].lower(), _year_of(match)
    relation = (match.groupdict().get("relation") or "").lower()

    def resolve(now: StoryPoint | None, default_year: int | None) -> Span | None:
        if year:
            return _season_span(season, year)
        today = _on_calendar(now)
        if today is None:
            return None
        return _latest(lambda y: _season_span(season, y), today, ended=relation in ("last", "past"))

    return resolve


_FIXED_DAYS = {
    "today": 0,
    "tonight": 0,
    "this morning": 0,
    "this afternoon": 0,
    "this evening": 0,
    "earlier today": 0,
    "yesterday": 1,
    "the day before yesterday": 2,
}


def _fixed_day(match: re.Match) -> Callable:
    phrase = " ".join(match[0].lower().split())

    def resolve(now: StoryPoint | None, default_year: int | None) -> Span | None:
        if now is None:
            return None
        if phrase == "last night":
            back = (1, 0)
        else:
            back = (_FIXED_DAYS[phrase], _FIXED_DAYS[phrase])
        if now.date is not None:
            return Span(CALENDAR, now.date.toordinal() - back[0], now.date.toordinal() - back[1])
        return Span(DAY_COUNT, now.day - back[0], now.day - back[1]) if now.day is not None else None

    return resolve


def _ago(match: re.Match) -> Callable:
    count_text = " ".join(match["count"].lower().split())
    low, high = NUMBER_WORDS.get(count_text) or (int(count_text), int(count_text))
    unit = match["unit"].lower()

    def resolve(now: StoryPoint | None, default_year: int | None) -> Span | None:
        if now is None:
            return None
        if unit in ("day", "week"):
            size, slack = (1, 0) if unit == "day" else (7, 3)
            clock, value = (CALENDAR, now.date.toordinal()) if now.date else (DAY_COUNT, now.day)
            if value is None:
                return None
            return Span(clock, value - high * size - slack, value - low * size + slack)
        today = now.date
        if today is None:
            return None
        if unit == "month":
            first = _add_months(today.year, today.month, -high)
            last = _add_months(today.year, today.month, -low)
            return Span(CALENDAR, _month_span(*first).start, _month_span(*last).end)
        return Span(
            CALENDAR, dt.date(today.year - high, 1, 1).toordinal(), dt.date(today.year - low, 12, 31).toordinal()
        )

    return resolve


def _relative_unit(match: re.Match) -> Callable:
    relation, unit = match["relation"].lower(), match["unit"].lower()

    def resolve(now: StoryPoint | None, default_year: int | None) -> Span | None:
        if now is None:
            return None
        today = now.date
        if relation == "past":  # a rolling window ending now
            days = {"week": 7, "month": 30, "year": 365, "weekend": 3}[unit]
            if today is not None:
                return Span(CALENDAR, today.toordinal() - days, today.toordinal())
            return Span(DAY_COUNT, now.day - days, now.day) if now.day is not None and unit == "week" else None
        back = 1 if relation == "last" else 0
        if today is None:  # the day clock: weeks of seven days from day 1
            if now.day is None or unit != "week":
                return None
            first = (now.day - 1) // 7 * 7 + 1 - 7 * back
            return Span(DAY_COUNT, first, min(first + 6, now.day))
        if unit in ("week", "weekend"):
            monday = _week_start(today) - dt.timedelta(days=7 * back)
            first, last = (
                (monday, monday + dt.timedelta(days=6))
                if unit == "week"
                else (monday + dt.timedelta(days=5), monday + dt.timedelta(days=6))
            )
            if first > today:
                return None  # this weekend, asked on a Wednesday: not yet happened
            return Span(CALENDAR, first.toordinal(), min(last, today).toordinal())
        if unit == "month":
            return _month_span(*_add_months(today.year, today.month, -back))
        return Span(
            CALENDAR, dt.date(today.year - back, 1, 1).toordinal(), dt.date(today.year - back, 12, 31).toordinal()
        )

    return resolve


def _weekday(match: re.Match) -> Callable:
    weekday, relation = WEEKDAYS[match["weekday"].lower()], match["relation"].lower()

    def resolve(now: StoryPoint | None, default_year: int | None) -> Span | None:
        today = _on_calendar(now)
        if today is None:
            return None
        back = (today.weekday() - weekday) % 7
        if back == 0 and relation == "last":
            back = 7
        return _day_span(today - dt.timedelta(days=back))

    return resolve


def _day_count(match: re.Match) -> Callable:
    first = int(match["first"])
    last = int(match["last"]) if match.groupdict().get("last") else first
    return lambda now, default_year: Span(DAY_COUNT, min(first, last), max(first, last))


# (pattern, resolver factory, needs a time word before it: `TIME_PREPOSITIONS`)
_RULES: tuple[tuple[re.Pattern, Callable[[re.Match], Callable], bool], ...] = (
    (_ISO, _iso_day, False),
    (re.compile(rf"\b(?:the\s+)?{_DAY}(?:\s+of)?\s+{_MONTH_NAME}(?:,?\s+{_YEAR})?\b", re.I), _a_day, False),
    (re.compile(rf"\b{_MONTH_NAME}\s+{_DAY}\b(?!:)(?:,?\s*{_YEAR}\b)?", re.I), _a_day, False),
    (
        re.compile(rf"\b(?:(?P<relation>last|this|early|mid|late)[\s-]+)?{_MONTH_NAME},?\s+(?:of\s+)?{_YEAR}\b", re.I),
        _a_month,
        False,
    ),
    (
        re.compile(
            rf"\b(?:(?P<relation>last|this|early|mid|late)[\s-]+)?(?:the\s+)?{_SEASON}(?:\s+of)?,?\s+{_YEAR}\b", re.I
        ),
        _a_season,
        False,
    ),
    (re.compile(rf"\b(?:the\s+year\s+)?{_YEAR}\b"), _a_year, True),
    (re.compile(rf"\b(?P<relation>last|this|past)\s+{_MONTH_NAME}\b(?!\s+\d)", re.I), _a_month, False),
    (re.compile(rf"\b(?:(?P<relation>early|mid|late)[\s-]+)?{_MONTH_NAME}\b(?!\s+\d)", re.I), _a_month, True),
    (re.compile(rf"\b(?P<relation>last|this|past)\s+{_SEASON}\b", re.I), _a_season, False),
    (re.compile(rf"\b(?:the\s+)?{_SEASON}\b", re.I), _a_season, True),
    (
        re.compile(
            r"\b(?:the\s+day\s+before\s+yesterday|yesterday|today|tonight|last\s+night|earlier\s+today"
            r"|this\s+(?:morning|afternoon|evening))\b",
            re.I,
        ),
        _fixed_day,
        False,
    ),
    (re.compile(rf"\b{_COUNT}\s+(?P<unit>day|week|month|year)s?\s+ago\b", re.I), _ago, False),
    (
        re.compile(r"\b(?:the\s+)?(?P<relation>last|this|past)\s+(?P<unit>week|month|year|weekend)\b", re.I),
        _relative_unit,
        False,
    ),
    (re.compile(rf"\b(?P<relation>last|this|on)\s+{_WEEKDAY}\b", re.I), _weekday, False),
    (
        re.compile(
            r"\bdays?\s+(?P<first>\d{1,6})(?:\s*(?:to|-|–|and|through)\s*(?:day\s+)?(?P<last>\d{1,6}))?\b", re.I
        ),
        _day_count,
        False,
    ),
)

# The expressions that name a recurring time, resolved to its latest occurrence (`_joined` may take an earlier one).
_RECURRING = (_a_month, _a_season, _a_day, _weekday)

_WORD_BEFORE = re.compile(r"([A-Za-z]+)[\s,-]*$")


def _word_before(query: str, start: int) -> str:
    match = _WORD_BEFORE.search(query[:start])
    return match.group(1).lower() if match else ""


def _acceptable(rule_index: int, match: re.Match, query: str) -> bool:
    """Refuse the readings that name no time: a bare month, season or year with no time word before it."""
    needs_word = _RULES[rule_index][2]
    month = match.groupdict().get("month")
    if month:
        bare = not match.groupdict().get("day") and not match.groupdict().get("year")
        if month.rstrip(".").lower() in MONTH_ABBREVIATIONS and bare:
            return False  # "Mar", "Dec": names as often as months
        if month.lower() == "may" and bare and month != "May":
            return False  # the modal verb
    if needs_word and not match.groupdict().get("relation") and not match[0].lower().startswith("the year"):
        return _word_before(query, match.start()) in TIME_PREPOSITIONS
    return True


@functools.lru_cache(maxsize=256)
def _find(query: str) -> tuple[_Found, ...]:
    """Every expression of the query, longest first where two overlap, in text order.

    Cached: a search asks `names_a_time` and then `named_time` of the same text (and "why
    not?" runs the search again), so each query is scanned by the fifteen rules once.
    """
    found: list[_Found] = []
    for index, (pattern, factory, _needs_word) in enumerate(_RULES):
        for match in pattern.finditer(query):
            if _acceptable(index, match, query):
                found.append(
                    _Found(
                        match.start(),
                        match.end(),
                        match[0].strip(),
                        factory(match),
                        has_year=bool(match.groupdict().get("year")),
                        recurs=factory in _RECURRING,
                    )
                )
    found.sort(key=lambda f: (f.start, -(f.end - f.start)))
    kept: list[_Found] = []
    for item in found:
        if kept and item.start < kept[-1].end:
            continue
        kept.append(item)
    return tuple(kept)


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
