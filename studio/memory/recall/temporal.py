"""Named time in memory search: the turns inside the time a query names, read from the save's story time.

`time_preference` is what `memory_search` (the API's query, the search playground and "why
not?") asks before a search, and what the narrator's context asks once, before its layers:
the same preference lifts its facts and beliefs (`context_items`) and goes to its narrative
search (`memory_search(prefer=...)`, which then reads nothing). When the query names a time
(`chapters.named_time`: "in May 2023", "three days ago", "last winter") and the save's turns
record story time (`chapters.story_time` keys `date`, `time`, `day`), it returns the turns up
to the horizon whose story time falls inside it, as a `retrieval.temporal.TimePreference`
for the temporal arm, with the note the explain record carries: "named time: May 2023 (1 May
2023 – 31 May 2023) → turns 40-61 preferred".

Relative expressions are resolved against the save's current story time: that of its latest
turn (at or before the horizon) that records one, per clock (calendar date, day count).

Returns None, and the search is exactly the search without a temporal arm, when: the query
names no time; the search is of lore only (lore chunks live at turn 0, outside story time);
no turn up to the horizon records a story time this code can read (a fictional calendar, no
keys); or a relative expression has no story time to count from. A named time with no turn
inside it returns an empty preference: the arm is skipped and the explain record says so.

Cost: one query of the turns' three story-time keys (JSON key extraction, not the whole
state), made only when the query's text names a time (once per context, whatever the layers
it serves); each distinct story time is parsed once. Not cached across calls: a cache would
have to be dropped on every turn appended, rewind, fork and state edit. Measured on LoCoMo 43 (680 turns, `bench/temporal_qa.py --latency`, caches warm): a
search naming a time took a median 8.2 ms with the arm, 6.3 ms without it (the turns' story
time read either way: ~4 ms), against 2.1 ms for a search naming none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from studio.memory.chapters.named_time import named_time, names_a_time
from studio.memory.chapters.story_points import StoryPoint, story_point
from studio.memory.retrieval.chunks import LORE
from studio.memory.retrieval.temporal import TimePreference
from studio.memory.turn_rows import consecutive_runs

if TYPE_CHECKING:
    from studio.world.models import Save

MAX_RUNS_SHOWN = 6


def turn_story_points(*, game_save: Save, horizon: int) -> dict[int, StoryPoint]:
    """Return {turn id: story point} for the turns up to `horizon` whose state records a readable one."""
    from studio.world.models import StateCache

    rows = StateCache.objects.filter(game_save_id=game_save.pk, turn_id__gte=1, turn_id__lte=horizon).values_list(
        "turn_id", "state__date", "state__time", "state__day"
    )
    points, parsed = {}, {}
    for turn_id, date, time_of_day, day in rows:
        key = (repr(date), repr(time_of_day), repr(day))  # turns share few distinct story times: parse each once
        if key not in parsed:
            parsed[key] = story_point({"date": date, "time": time_of_day, "day": day})
        if parsed[key] is not None:
            points[turn_id] = parsed[key]
    return points


def current_story_point(points: dict[int, StoryPoint]) -> StoryPoint | None:
    """The save's current story time: per clock, that of the latest turn recording one."""
    latest_first = [points[turn] for turn in sorted(points, reverse=True)]
    date = next((point.date for point in latest_first if point.date is not None), None)
    day = next((point.day for point in latest_first if point.day is not None), None)
    return StoryPoint(date=date, day=day) if date is not None or day is not None else None


def turn_runs(turns: list[int]) -> str:
    """Write sorted turn ids as runs: "40-61, 70, 75-80" (the first few, then how many in all)."""
    runs = consecutive_runs(turns)
    text = ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in runs[:MAX_RUNS_SHOWN])
    if len(runs) > MAX_RUNS_SHOWN:
        text += f", … ({len(turns)} turns)"
    return text


def time_preference(
    *, game_save: Save, query_text: str, horizon: int, chunk_type: str | None = None
) -> TimePreference | None:
    """Return the turns inside the time `query_text` names, or None when there is no temporal arm."""
    if chunk_type == LORE or not names_a_time(query_text):
        return None
    points = turn_story_points(game_save=game_save, horizon=horizon)
    if not points:
        return None
    named = named_time(query_text, current_story_point(points))
    if named is None:
        return None
    inside = sorted(turn for turn, point in points.items() if named.holds(point))
    if not inside:
        return TimePreference(
            turns=frozenset(), note=f"named time: {named.label} → no turn inside it", label=named.label
        )
    turns = "turn" if len(inside) == 1 else "turns"
    return TimePreference(
        turns=frozenset(inside),
        note=f"named time: {named.label} → {turns} {turn_runs(inside)} preferred",
        label=named.label,
    )
