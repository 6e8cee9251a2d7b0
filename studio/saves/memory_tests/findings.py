"""Where `no_findings` tests read the continuity guard's findings: one small interface.

The guard (issue 32, part 1) records its findings as rows of the turn. This module does not
know its tables: the app that owns them registers a source at start-up::

    # its AppConfig.ready()
    from studio.saves.memory_tests import findings
    findings.register_findings_source(my_findings_in_turns)

A source is `source(game_save, *, first_turn, last_turn, kind)` returning the findings of the
save recorded in turns `first_turn` to `last_turn` (`kind` None: every kind), each a dict with
at least `kind` and `turn_id` (and, when the guard has them, `sentence`, `item`, `why`).
Until one is registered there are no findings: a `no_findings` test passes, and its explain
record says that no guard is installed.
"""

from __future__ import annotations

from typing import Any, Callable

FindingsSource = Callable[..., list[dict[str, Any]]]
NO_SOURCE_NOTE = "no continuity guard is installed: there are no findings to read"

_source: FindingsSource | None = None


def register_findings_source(source: FindingsSource | None) -> None:
    """Read findings from `source` from now on (None: no guard; tests use it to reset)."""
    global _source
    _source = source


def findings_source() -> FindingsSource | None:
    return _source


def findings_in_turns(game_save, *, first_turn: int, last_turn: int, kind: str | None = None) -> tuple[list[dict], str]:
    """Return the save's findings in turns `first_turn`..`last_turn` (of `kind`, or all), and a note
    ("" when a guard answered; `NO_SOURCE_NOTE` when none is installed)."""
    if _source is None:
        return [], NO_SOURCE_NOTE
    found = _source(game_save, first_turn=first_turn, last_turn=last_turn, kind=kind)
    return [dict(item) for item in found if kind is None or item.get("kind") == kind], ""
