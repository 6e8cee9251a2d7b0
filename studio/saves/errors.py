"""Errors the saves services raise for a request that no longer fits the save's state."""

from __future__ import annotations


class TurnConflict(Exception):
    """The save is not at the turn the caller expected (it moved on since they read it).

    Raised by `turn_append(expected_turn_id=...)` and `CheckpointManager.rewind(
    expected_current_turn=...)`, which check under the save's lock, so of two requests
    made against the same turn only one goes through. Nothing was written. The API answers
    409 with `current_turn`; the pages show the message and the save as it is now.
    """

    def __init__(self, message: str, *, save_id: str, current_turn: int):
        super().__init__(message)
        self.message = message
        self.save_id = save_id
        self.current_turn = current_turn
