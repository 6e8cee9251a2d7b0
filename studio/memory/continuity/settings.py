"""The continuity guard's settings: Universe_Meta knobs declared once, like the memory context's.

Each is a `Knob` (`studio.memory.recall.policy.Knob`: its default, why, meta key, bounds and the
Metadata page's help). `guard_settings(meta)` builds the frozen `GuardSettings` one check runs
with; `guard_knob_validate` is `universes.services.meta_validate`'s check of these keys and
`universes.meta_keys` lists them from `GUARD_KNOBS`. A value out of bounds in Universe_Meta is
ignored for the default, never half-applied. Pure: no Django, no database.

The model the guard's judge asks is the `guard` operation's (`AXIOM_LLM_MODEL_GUARD`, else
`AXIOM_LLM_MODEL`; `AXIOM_LLM_MAX_TOKENS_GUARD`, `AXIOM_LLM_TEMPERATURE_GUARD`: temperature 0 by
default); its calls are logged (`LLMCall`, operation "guard") and count against the save's spend
guard, and against the guard's own cap per save and hour (`continuity_guard_calls_per_hour`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from studio.memory.recall.policy import Knob

__all__ = [
    "GUARD_GROUP",
    "GUARD_KNOBS",
    "GUARD_META_KNOBS",
    "GuardSettings",
    "MODES",
    "guard_knob_validate",
    "guard_settings",
]

GUARD_GROUP = "Continuity guard"
OFF, WARN, REGENERATE = "off", "warn", "regenerate"
MODES = {
    OFF: "no check",
    WARN: "check every proposed narration and show what it finds beside the draft",
    REGENERATE: "check, and when it finds something, narrate once more with the findings as instructions (the "
    "first proposal stays as an alternative)",
}

GUARD_KNOBS: tuple[Knob, ...] = (
    Knob(
        "mode",
        WARN,
        meta_key="continuity_guard",
        kind="choice",
        choices=tuple(MODES),
        group=GUARD_GROUP,
        why="the deterministic checks cost milliseconds and found 0 false findings over the demo's 48 turns "
        '(docs/benchmarks.md, "Continuity guard"): on by default, as a warning',
        help="What the continuity guard does with a proposed narration (docs/continuity.md): "
        + "; ".join(f"{name}: {what}" for name, what in MODES.items())
        + ".",
    ),
    Knob(
        "judge",
        True,
        meta_key="continuity_guard_judge",
        kind="bool",
        group=GUARD_GROUP,
        why="a contradiction is only a candidate until a model reads the sentence beside the item it may contradict; "
        "on the local 1.5B model the judge confirmed 10/15 seeded contradictions and 2/4 false ones "
        '(docs/benchmarks.md, "Continuity guard"): with a model that small, turn it off',
        help="true or false: ask the model (the guard operation's, AXIOM_LLM_MODEL_GUARD) to judge the possible "
        "contradictions the search found; without a model, or false, they are shown as possible.",
    ),
    Knob(
        "confirm_leaks",
        False,
        meta_key="continuity_guard_confirm_leaks",
        kind="bool",
        group=GUARD_GROUP,
        why="the leak check is deterministic (terms the speaker cannot know and the sentence's meaning); a small "
        "model's confirmation would drop true leaks as often as false ones",
        help="true or false: also ask the model to confirm each leak the deterministic check found (one call per "
        "narration with leaks); a leak it rejects is kept, marked rejected.",
    ),
    Knob(
        "calls_per_hour",
        60,
        meta_key="continuity_guard_calls_per_hour",
        low=0,
        high=100_000,
        group=GUARD_GROUP,
        why="one judge call per narration with candidates: 60 an hour is a busy playtest; the save's own spend guard "
        "(AXIOM_LLM_CALLS_PER_HOUR) applies as well",
        help="Most calls the guard's judge makes for one save in an hour (0: none, the checks stay deterministic). "
        "Over it, candidates are shown as possible, not judged.",
    ),
    Knob(
        "max_candidates",
        6,
        meta_key="continuity_guard_max_candidates",
        low=1,
        high=50,
        group=GUARD_GROUP,
        why="a judge prompt with six candidates stays under ~600 tokens for a small local model",
        help="Most possible contradictions one narration sends to the judge (the strongest first).",
    ),
)
GUARD_META_KNOBS: dict[str, Knob] = {knob.meta_key: knob for knob in GUARD_KNOBS}


@dataclass(frozen=True)
class GuardSettings:
    """The guard's knobs for one check (`GUARD_KNOBS` has each one's meaning and why)."""

    mode: str = WARN
    judge: bool = True
    confirm_leaks: bool = False
    calls_per_hour: int = 60
    max_candidates: int = 6

    @property
    def on(self) -> bool:
        return self.mode != OFF

    @property
    def regenerates(self) -> bool:
        return self.mode == REGENERATE


def guard_settings(meta: Mapping[str, str] | None = None, **override) -> GuardSettings:
    """Return the guard's settings from Universe_Meta (invalid values: the default), with `override` on top."""
    values = {}
    for key, knob in GUARD_META_KNOBS.items():
        if meta and key in meta:
            try:
                values[knob.field] = knob.parse(meta[key])
            except ValueError:
                continue
    values.update(override)
    return GuardSettings(**values)


def guard_knob_validate(key: str, value: str) -> str | None:
    """Return the value to store for a guard key (None: not a guard key); raise ValueError saying what is wrong."""
    knob = GUARD_META_KNOBS.get(key)
    return None if knob is None else knob.stored(value)
