"""The saves app's per-turn tables in the timeline registry, registered by `SavesConfig.ready()`.

The Event_Log and the state cache (in the save file's `turns` section), the narrator's
snapshots (what it saw at each accepted turn) and its drafts (narration proposed for the
next turn, not yet accepted). Each is a plain table: a rewind deletes the rows after N,
a fork copies those up to N. Appending a turn writes its Event (`turn.rows["events"]`) and
its state (`{}` when the turn has none) before any other table's hook. The Save itself and a
draft's alternatives are declared exempt.
"""

from __future__ import annotations

from studio.memory import timeline
from studio.saves.models import NarratorAlternative, NarratorDraft, NarratorSnapshot
from studio.world.models import Event, Save, StateCache


def append_event(turn: timeline.TurnAppend) -> None:
    turn.rows["events"] = Event.objects.create(
        game_save=turn.save, turn_id=turn.turn_id, player_input=turn.player_input or "", narrative=turn.narrative or ""
    )


def append_state(turn: timeline.TurnAppend) -> None:
    turn.rows["states"] = StateCache.objects.create(
        game_save=turn.save, turn_id=turn.turn_id, state=turn.state if turn.state is not None else {}
    )


TABLES = [
    timeline.TurnTable.plain(
        "events", Event, order=10, section="turns", label="Turns (events)", append=append_event, preview="turn"
    ),
    timeline.TurnTable.plain(
        "states", StateCache, order=20, section="turns", label="State snapshots", append=append_state
    ),
    timeline.TurnTable.plain(
        "narrator_snapshots", NarratorSnapshot, order=80, section="narrator_snapshots", label="Narrator snapshots"
    ),
    timeline.TurnTable.plain(
        "narrator_drafts",
        NarratorDraft,
        order=90,
        section=None,
        counted=False,
        copied=False,
        note=(
            "A draft is narration not yet accepted, made for the turn after the save's current one: a rewind "
            "drops the drafts of the dropped turns (uncounted, they were never part of the timeline); a fork "
            "and a save file start without drafts."
        ),
    ),
]


def register() -> None:
    """Register the saves app's per-turn tables, and declare its other turn-keyed models exempt."""
    for entry in TABLES:
        timeline.register_table(entry)
    timeline.exempt_model(
        Save,
        reason="the timeline itself: a rewind moves its current_turn; fork_turn records where a fork began",
    )
    timeline.exempt_model(
        NarratorAlternative,
        reason="part of a NarratorDraft: deleted with its draft (CASCADE), never forked or exported, as drafts",
    )
