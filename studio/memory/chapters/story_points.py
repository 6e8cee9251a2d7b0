"""Story points: when a turn happens, on a calendar, a day count, or both, read from its state.

`story_point(state)` reads a turn's state into a `StoryPoint` (either clock, or both, or None:
"the 3rd of Frostmoot" has no calendar here, and a turn without story time has none);
`calendar_date(text)` reads a calendar day written in full (ISO, day-month-year, month-day-year).
A `Span` is a closed range on one clock. `named_time.py` resolves what a query names into spans;
`story_time.py` says how games keep story time. Pure (no Django).
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

CALENDAR = "calendar"
DAY_COUNT = "day"

MONTHS = {name: number for number, name in enumerate(calendar.month_name) if name}
MONTH_ABBREVIATIONS = {
    "jan": 1,
    "feb": 2,
    "mar": 3,
    "apr": 4,
    "jun": 6,
    "jul": 7,
    "aug": 8,
    "sep": 9,
    "sept": 9,
    "oct": 10,
    "nov": 11,
    "dec": 12,
}

_MONTH_NAME = (
    r"(?P<month>january|february|march|april|may|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?"
)
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>\d{4})"


@dataclass(frozen=True)
class StoryPoint:
    """When a turn happens: a calendar day (`date`), a day count (`day`), either or both."""

    date: dt.date | None = None
    day: int | None = None

    def value(self, clock: str) -> int | None:
        """Return the point on `clock` as an int (a date's ordinal), or None when it has none there."""
        if clock == CALENDAR:
            return self.date.toordinal() if self.date else None
        return self.day


@dataclass(frozen=True)
class Span:
    """A closed range on one clock; None is open (before ..., after ...)."""

    clock: str
    start: int | None
    end: int | None

    def holds(self, point: StoryPoint) -> bool:
        value = point.value(self.clock)
        return (
            value is not None
            and (self.start is None or value >= self.start)
            and (self.end is None or value <= self.end)
        )

    def describe(self) -> str:
        def one(value: int | None) -> str:
            if self.clock == DAY_COUNT:
                return f"day {value}"
            day = dt.date.fromordinal(value)
            return f"{day.day} {calendar.month_name[day.month]} {day.year}"

        if self.start is None and self.end is None:
            return "any time"
        if self.start is None:
            return f"up to {one(self.end)}"
        if self.end is None:
            return f"from {one(self.start)}"
        return one(self.start) if self.start == self.end else f"{one(self.start)} – {one(self.end)}"


_ISO = re.compile(r"\b(?P<year>\d{4})-(?P<month>\d{1,2})-(?P<day>\d{1,2})(?!\d)")
_DAY_MONTH_YEAR = re.compile(rf"\b(?:the\s+)?{_DAY}(?:\s+of)?\s+{_MONTH_NAME},?\s+{_YEAR}\b", re.I)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH_NAME}\s+{_DAY},?\s+{_YEAR}\b", re.I)
_DAY_COUNT_VALUE = re.compile(r"^\s*(?:day\s*)?(?P<day>-?\d+)\s*$", re.I)


def _month_number(name: str) -> int:
    name = name.lower().rstrip(".")
    return MONTHS.get(name.capitalize()) or MONTH_ABBREVIATIONS[name]


def _make_date(year: int, month: int, day: int) -> dt.date | None:
    try:
        return dt.date(year, month, day)
    except ValueError:
        return None


def calendar_date(text: Any) -> dt.date | None:
    """Return the calendar day a story-time text names in full (day, month and year), or None."""
    if not isinstance(text, str):
        return None
    match = _ISO.search(text)
    if match:
        return _make_date(int(match["year"]), int(match["month"]), int(match["day"]))
    for pattern in (_DAY_MONTH_YEAR, _MONTH_DAY_YEAR):
        match = pattern.search(text)
        if match:
            return _make_date(int(match["year"]), _month_number(match["month"]), int(match["day"]))
    return None


def story_point(state: Any) -> StoryPoint | None:
    """Return when a turn happens from its state (`date`, else a date inside `time`; `day`), or None."""
    if not isinstance(state, dict):
        return None
    date = calendar_date(state.get("date")) or calendar_date(state.get("time"))
    day = None
    raw_day = state.get("day")
    if isinstance(raw_day, int) and not isinstance(raw_day, bool):
        day = raw_day
    elif isinstance(raw_day, str) and (match := _DAY_COUNT_VALUE.match(raw_day)):
        day = int(match["day"])
    if date is None and day is None:
        return None
    return StoryPoint(date=date, day=day)


# --- Calendar arithmetic ---------------------------------------------------------------------
