"""Presence and reveals in the timeline registry (registered by `MemoryConfig.ready()`).

Both tables are plain: their rows never change once their turn is gone, so a rewind deletes
the rows after N, a fork copies those up to N (every column), the save file's `presence` and
`reveals` sections carry them. Appending a turn records its presence (`state["present"]`,
else carried from the previous turn) and the reveals its state lists (`state["reveals"]`);
a malformed key raises ValueError and the turn's transaction writes nothing. Reveals cite
facts, so they run after the facts (order 35): a fork remaps each reveal's fact to the fork's
copy (`remaps`); a reveal of a fact the fork does not have cannot exist (a fact is never
newer than a reveal of it).
"""

from __future__ import annotations

from studio.memory import timeline
from studio.memory.knowledge.models import Presence, Reveal
from studio.memory.knowledge.presence import presence_record_turn
from studio.memory.knowledge.reveals import reveals_from_state


def append_presence(turn: timeline.TurnAppend) -> None:
    presence_record_turn(save=turn.save, turn_id=turn.turn_id, state=turn.state, index=turn.options.get("index"))


def append_reveals(turn: timeline.TurnAppend) -> None:
    reveals_from_state(save=turn.save, turn_id=turn.turn_id, state=turn.state, index=turn.options.get("index"))


TABLES = [
    timeline.TurnTable.plain(
        "presence", Presence, order=25, section="presence", label="Presence records", append=append_presence
    ),
    timeline.TurnTable.plain(
        "reveals",
        Reveal,
        order=35,
        section="reveals",
        label="Reveals",
        remaps={"fact_id": "facts"},
        append=append_reveals,
    ),
]


def register() -> None:
    for entry in TABLES:
        timeline.register_table(entry)
