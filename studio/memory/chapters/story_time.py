"""Story time: when, in the story, a turn happens, read from the turn's state.

A game (or the playtester) records story time in the turn's state under these keys, any of
them, all optional: `date` (a calendar date as the story writes it: "8 May, 2023", "the 3rd
of Frostmoot"), `day` (a day count: 3, or "Day 3"), `time` (a time of day: "dusk", "14:00").
`story_time_of(state)` joins what is there into one label ("8 May, 2023, dusk";
"day 3, dusk"); a state without them has no story time (""). Turns carry it in their state;
facts and narrative chunks are dated by their turn; chapters record the story time of
their first and last turns. The memory context prints it beside what it dates.
"""

from __future__ import annotations

from typing import Any

STORY_TIME_KEYS = ("date", "day", "time")
MAX_LABEL_CHARS = 120


def story_time_of(state: Any) -> str:
    """Return the story time a turn's state records ("" without one)."""
    if not isinstance(state, dict):
        return ""
    parts = []
    for key in STORY_TIME_KEYS:
        value = state.get(key)
        if value is None or isinstance(value, (dict, list)) or str(value).strip() == "":
            continue
        text = str(value).strip()
        if key == "day" and not text.lower().startswith("day"):
            text = f"day {text}"
        parts.append(text)
    return ", ".join(parts)[:MAX_LABEL_CHARS]


def story_times(game_save, turn_ids) -> dict[int, str]:
    """Return {turn id: story time} for those of `turn_ids` whose state records one (one query)."""
    from studio.memory.turn_rows import turns_q
    from studio.world.models import StateCache

    turn_ids = [t for t in set(turn_ids) if t is not None]
    if not turn_ids:
        return {}
    out = {}
    for turn_id, state in StateCache.objects.filter(turns_q(turn_ids), game_save_id=game_save.pk).values_list(
        "turn_id", "state"
    ):
        label = story_time_of(state)
        if label:
            out[turn_id] = label
    return out
