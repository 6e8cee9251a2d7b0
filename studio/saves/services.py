"""Writes for saves: create a save, append a turn, edit a turn's narrative.

Each runs in one transaction; the background work it causes (lore and turn embedding, the
living pipeline) is queued as Job rows in that transaction and handed to the runner when it
commits (`studio.memory.jobs`). If the job queue is unreachable at that moment the turn is
kept all the same and its jobs are marked failed with a retryable error.

`turn_append` writes the turn through the timeline registry's append hooks (`turn_record`,
`studio.memory.timeline.append_turn`), in the same transaction and registry order: the
Event and its state, the turn's presence (`state["present"]`, a list of names; else carried
from the previous turn until the state's `location` changes) and the reveals the state lists
(`state["reveals"]`; a malformed key raises ValueError with nothing written), its lore
activation (what activated, the sticky and cooldown windows it left), the chapter a scene
change or the turn limit closes. Every path that appends a turn (the Console, the API, the
memory proxy, the importers, the demo) goes through `turn_record`.

Every text is checked against its declared limit first (`studio/limits.py`: the save's name,
a turn's input and narrative), raising `limits.Refused` (a ValueError naming the field) with
nothing written: whatever path called, the save stays one its save file can carry.

`turn_append` first finishes a failed rewind's vector delete (outside any transaction: the
vector store is not the database), so it must not be called inside an open transaction.
With `expected_turn_id` it appends only if the new turn gets that id, checked under the
save's lock (`select_for_update`; SQLite's IMMEDIATE transactions serialise the same way):
of two requests made against the same turn (a double-submitted form, two engines) one
appends and the other gets `TurnConflict` with nothing written.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from studio import limits
from studio.memory import jobs, timeline
from studio.memory.vector import VectorStoreError
from studio.saves.checkpoints import CheckpointManager
from studio.saves.errors import TurnConflict
from studio.world.models import Event, MemoryMode, Save
from studio.universes.services.persona import persona_settle

__all__ = [
    "PendingVectorCleanupError",
    "TurnConflict",
    "finish_pending_vector_rollback",
    "save_create",
    "turn_append",
    "turn_record",
    "turn_update_narrative",
]


class PendingVectorCleanupError(VectorStoreError):
    """A rewind's vector delete has not completed and cannot be finished right now.

    Appending a turn then would let chunks of the rewound timeline at the new turn ids come
    back into memory queries, so the turn is refused (nothing written) until the vector
    store is reachable again.
    """


def save_create(*, universe, name: str, memory_mode: str = MemoryMode.CLASSIC, beliefs_enabled: bool = True) -> Save:
    """Create a save of `universe` with a copy of its Universe_Meta; queue its lore sync."""
    if memory_mode not in MemoryMode.values:
        raise ValueError(f"unknown memory mode {memory_mode!r}")
    limits.SAVE_NAME.check(name)
    with transaction.atomic():
        # First use of an old one-value player_character: keep its name / description split.
        persona_settle(universe=universe)
        meta = universe.meta_values()
        save = Save.objects.create(
            universe=universe,
            name=name,
            memory_mode=memory_mode,
            beliefs_enabled=beliefs_enabled,
            meta=meta,
        )
        jobs.enqueue_sync_lore(game_save=save)
    return save


def turn_append(
    *,
    game_save: Save,
    player_input: str,
    narrative: str,
    state: dict | None = None,
    expected_turn_id: int | None = None,
) -> Event:
    """Append the next turn (current turn + 1) with its state; queue its memory jobs.

    Updates `game_save.current_turn` and `last_activity_at` (also on the passed instance).
    With `expected_turn_id`, raise TurnConflict (nothing written) unless the new turn gets
    that id. If an earlier rewind's vector delete is still pending, it is finished first;
    when that fails, PendingVectorCleanupError is raised and nothing is written.
    """
    limits.TURN_INPUT.check(player_input or "")
    limits.TURN_NARRATIVE.check(narrative or "")
    finish_pending_vector_rollback(game_save=game_save)
    with transaction.atomic():
        locked = Save.objects.select_for_update().get(pk=game_save.pk)
        turn_id = locked.current_turn + 1
        if expected_turn_id is not None and expected_turn_id != turn_id:
            raise TurnConflict(
                f"Save {locked.save_id} is at turn {locked.current_turn}; the next turn is "
                f"{turn_id}, not {expected_turn_id}.",
                save_id=locked.save_id,
                current_turn=locked.current_turn,
            )
        # Every per-turn table's append hook, in registry order (`studio.memory.timeline`): the
        # Event and its state, presence and reveals, lore activation, a chapter closed.
        event = turn_record(save=locked, turn_id=turn_id, player_input=player_input, narrative=narrative, state=state)
        now = timezone.now()
        Save.objects.filter(pk=locked.pk).update(current_turn=turn_id, last_activity_at=now, updated_at=now)
        locked.current_turn = turn_id
        locked.last_activity_at = now
        jobs.enqueue_turn(game_save=locked, turn_id=turn_id, event_id=event.pk)
    game_save.current_turn = turn_id
    game_save.last_activity_at = now
    event.game_save = game_save
    return event


def turn_record(
    *, save: Save, turn_id: int, player_input: str = "", narrative: str = "", state: dict | None = None, **options
) -> Event:
    """Write turn `turn_id` of `save` (locked, in the caller's transaction) through every registered
    table's append hook (`timeline.append_turn`); return its Event. The caller moves the save's turn
    and queues its jobs; `options` go to the hooks (`TurnAppend.options`)."""
    turn = timeline.append_turn(
        timeline.TurnAppend(
            save=save,
            turn_id=turn_id,
            player_input=player_input or "",
            narrative=narrative or "",
            state=state,
            options=options,
        )
    )
    return turn.rows["events"]


def turn_update_narrative(
    *, game_save: Save, turn_id: int, narrative: str, player_input: str | None = None, edited: bool = True
) -> Event:
    """Replace a turn's narrative (and its input, when given); re-embed it and, in living mode, re-extract it.

    The re-embedding goes through `VectorMemory.update_turn_narrative` (old chunks of the
    turn deleted, the new text embedded); the re-extraction first removes what the old text
    produced for that turn (see `studio.memory.pipeline.living.forget_turn_outputs`). The
    turn's recorded lore activation is kept (the memory proxy edits an input in place too).
    `edited`: the text is the playtester's own (the turn is marked edited, `Event.edited_at`);
    False when it is one of the narrator's alternatives chosen by a swipe (the mark goes).
    """
    limits.TURN_NARRATIVE.check(narrative or "")
    if player_input is not None:
        limits.TURN_INPUT.check(player_input)
    with transaction.atomic():
        locked = Save.objects.select_for_update().get(pk=game_save.pk)
        event = Event.objects.select_for_update().get(game_save=locked, turn_id=turn_id)
        event.narrative = narrative or ""
        event.edited_at = timezone.now() if edited else None
        fields = ["narrative", "edited_at"]
        if player_input is not None:
            event.player_input = player_input
            fields.append("player_input")
        event.save(update_fields=fields)
        Save.objects.filter(pk=locked.pk).update(updated_at=timezone.now())
        jobs.enqueue_turn(game_save=locked, turn_id=turn_id, reextract=True, event_id=event.pk)
    event.game_save = game_save
    return event


def finish_pending_vector_rollback(*, game_save: Save) -> None:
    """Finish a failed rewind's vector delete before the timeline grows again.

    Queries use the save's current turn as their horizon, so chunks left after turn N by a
    failed delete stay invisible only until new turns reach their ids. Runs the pending
    VECTOR_ROLLBACK jobs now, through the job ledger (each run is a counted attempt), outside
    any transaction (the delete is outside the database); raises PendingVectorCleanupError
    when the delete still cannot be done.
    """
    manager = CheckpointManager()
    if not manager.has_pending_vector_rollback(game_save):
        return
    outcome = manager.finish_vector_rollback(game_save)
    if outcome["failed"]:
        raise PendingVectorCleanupError(
            "The vector store has not yet deleted the chunks of the turns removed by the last "
            "rewind, and it cannot be reached now; appending a turn would bring the old timeline "
            f"back into memory. Retry when the vector store is up. ({outcome['error']})"
        )
