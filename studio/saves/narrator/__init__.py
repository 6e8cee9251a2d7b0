"""The narrator of the Console ("Play"): prompt, drafts, streaming, accept, snapshots.

- `prompt`: the narrator prompt, built from the universe's instructions template
  (`narrator_instructions` in Universe_Meta, `DEFAULT_INSTRUCTIONS` when unset), the meta
  the author set, the recent turns and the memory context (`next_turn_context`, the one
  path the Context viewer and the API take too).
- `services`: drafts and their alternatives, the streamed narration, accept / choose /
  discard, and `narrate_once` (the API's proposal, nothing stored).
- `portable`: the `narrator_snapshots` and `play_settings` sections of the save file.

Invariant: nothing reaches the Event_Log before the playtester accepts. A narration that
fails, is cut, or whose request is killed mid-stream leaves an alternative marked failed or
cancelled, never a turn; accepting goes through `turn_append` with the draft's turn as the
expected turn, in one transaction with the turn's `NarratorSnapshot` and the narration's
memory queries recorded for Lore replay.
"""
