"""A universe's opening: its first message, alternate greetings and scenario (Universe_Meta).

SillyTavern's card fields, for every universe, card or not: `first_message` (turn 1 as the
narrator's, macros filled when play reads it), `alternate_greetings` (a JSON array of strings,
other openings to choose from) and `scenario` (the situation at the start, prose for the
narrator: whole, once, in its instructions, where the template puts `{{scenario}}`, else after
them: `saves.narrator.prompt.render_instructions`).
The Metadata page's opening form writes them (`services.opening_set`), Universe-as-Code carries
them as its `[opening]` table, and a Character Card export fills `first_mes`,
`alternate_greetings` and `scenario` from them. A universe whose opening is empty opens with its
imported card's greetings instead (`saves.narrator.opening.opening_greetings`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

FIRST_MESSAGE_META = "first_message"
ALTERNATE_GREETINGS_META = "alternate_greetings"
SCENARIO_META = "scenario"
OPENING_META_KEYS = (FIRST_MESSAGE_META, ALTERNATE_GREETINGS_META, SCENARIO_META)
MAX_GREETING_CHARS = 20_000
MAX_GREETINGS = 20
MAX_SCENARIO_CHARS = 8_000


@dataclass(frozen=True)
class Opening:
    first_message: str = ""
    alternate_greetings: list[str] = field(default_factory=list)
    scenario: str = ""

    @property
    def greetings(self) -> list[str]:
        """The first message then the alternate greetings, those with text ([] without a first message)."""
        if not self.first_message.strip():
            return []
        return [g for g in [self.first_message, *self.alternate_greetings] if g.strip()]


def greetings_from_json(raw: str | None) -> list[str]:
    """Return the alternate greetings a stored value holds ([] when it is not a JSON array of strings)."""
    try:
        value = json.loads(raw or "[]")
    except (TypeError, ValueError):
        return []
    return [item for item in value if isinstance(item, str) and item.strip()] if isinstance(value, list) else []


def opening_from_meta(meta: Mapping[str, str]) -> Opening:
    """Return the opening a universe's meta values hold."""
    return Opening(
        first_message=(meta.get(FIRST_MESSAGE_META) or "").strip(),
        alternate_greetings=greetings_from_json(meta.get(ALTERNATE_GREETINGS_META)),
        scenario=(meta.get(SCENARIO_META) or "").strip(),
    )


def opening_problems(*, first_message: str, alternate_greetings: list[str], scenario: str) -> dict[str, str]:
    """Return {field: what is wrong} for an opening (empty when it may be stored)."""
    problems: dict[str, str] = {}
    if len(first_message) > MAX_GREETING_CHARS:
        problems["first_message"] = f"The first message is longer than {MAX_GREETING_CHARS:,} characters."
    if alternate_greetings and not first_message.strip():
        problems["first_message"] = "Write the first message too: the alternate greetings are other choices beside it."
    if len(alternate_greetings) > MAX_GREETINGS:
        problems["alternate_greetings"] = f"At most {MAX_GREETINGS} alternate greetings."
    elif any(len(g) > MAX_GREETING_CHARS for g in alternate_greetings):
        problems["alternate_greetings"] = f"A greeting is longer than {MAX_GREETING_CHARS:,} characters."
    if len(scenario) > MAX_SCENARIO_CHARS:
        problems["scenario"] = f"The scenario is longer than {MAX_SCENARIO_CHARS:,} characters."
    for name, value in (
        ("first_message", first_message),
        ("scenario", scenario),
        *(("alternate_greetings", g) for g in alternate_greetings),
    ):
        if "\x00" in value:
            problems[name] = "The text holds a NUL character."
    return problems
