"""The time expressions a query may hold, found and made ready to resolve (`named_time.py` uses them).

Each rule of `_RULES` is a pattern (the month, day and year pieces are `story_points.py`'s),
the factory of its resolver, and whether it needs a time word before it ("in May", not "May
I"). `_find` scans a query with every rule and keeps, where two overlap, the longest: each a
`_Found` whose `resolve(now, default_year)` gives its `Span` on either clock (None when it
cannot be resolved: a relative expression without `now`). The calendar arithmetic the
resolvers share (months, seasons, weeks, the latest occurrence of a yearly span) is here too.
What is understood, and what is refused on purpose, is listed in named_time.py's docstring.

Pure (no Django).
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

_COUNT = (
    r"(?P<count>\d{1,3}|a couple of|a few|several|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
)
_SEASON = r"(?P<season>winter|spring|summer|autumn|fall)"
_WEEKDAY = r"(?P<weekday>monday|tuesday|wednesday|thursday|friday|saturday|sunday)"


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
