"""Per-save lore activation state, stored by turn (LoreActivation rows).

The engine (`lore_activation.py`) is pure; this module is where its results meet the
database. The functions are the ones the play loop, `CheckpointManager.rewind` / `fork` and
the replay call:

- `lore_activation_for_turn`: evaluate the book for a turn from the state as of the turn
  before (reads only);
- `record_activation`: store what a turn activated and the state it left (one row per
  save and turn; recording a turn again replaces it);
- `activation_state_as_of`: the state after turn N (the newest row at or before N);
- `lore_activation_rollback`: delete the rows after N (call it inside the rewind's
  transaction, so the state as of N is restored with everything else);
- a fork copies the rows up to N through the timeline registry (the `lore_activations`
  table: every column, `timeline.copy_columns`);
- `lore_activation_record_turn`: evaluate and record a turn that is being appended (the
  `lore_activations` table's append hook, inside the append's transaction, so every turn of
  the Event_Log has its row);
- `lore_activation_replay`: recompute the rows of turns from the Event_Log (a save imported
  without them, or after the book changed), turn by turn from the state before.

Seeds: `lore_seed_for` derives every turn's seed from the save's lineage root (a fork
shares its origin's root), the timeline generation and the turn. A fork of a save that was
never rewound therefore continues with the same rolls; a rewind starts a new generation and
so new rolls after N, as the issue asks. A fork takes its source's timeline generation
(`CheckpointManager.fork`), so its rolls after N are the ones the source drew after N; each
save counts its own rewinds from there.

Macros: `{{user}}` / `{{char}}` in keys are filled from `lore_macros_for(save)`, the one
rule of `studio.memory.recall.macros.macro_names` (the player character; the imported card's
character), the same values for the recording, the Context viewer and the key tester, so
all see the same activations.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Count, Max

from studio.memory.lore_activation import (
    ActivationResult,
    CompiledBook,
    LoreDefaults,
    LoreState,
    activate,
    activation_seed,
    compiled_book,
    defaults_from_meta,
    scan_messages,
    spec_from_entry,
)
from studio.memory.recall.macros import macro_names
from studio.memory.models import LoreActivation
from studio.memory.turn_rows import upsert_turn_row

HISTORY_TURNS_CAP = 500  # scan depth is at most 1000 messages = 500 turns


def lore_seed_for(*, save, turn_id: int) -> str:
    root = save
    seen = set()
    while root.forked_from_id and root.forked_from_id not in seen:
        seen.add(root.forked_from_id)
        root = root.forked_from
    return activation_seed(save_id=root.save_id, generation=save.timeline_generation, turn=turn_id)


def activation_state_as_of(*, save, turn_id: int) -> LoreState:
    """Return the lore state after turn `turn_id` (a fresh state before the first record)."""
    row = LoreActivation.objects.filter(game_save=save, turn_id__lte=turn_id).order_by("-turn_id").only("state").first()
    return LoreState.from_dict(row.state if row else None)


def record_activation(
    *, save, turn_id: int, result: ActivationResult, seed: str, book_version: str = ""
) -> LoreActivation:
    """Store a turn's activation (replacing an earlier record of the same turn)."""
    values = {
        "state": result.state.to_dict(),
        "activated": result.activated_ids,
        "sequence": list(result.sequence),
        "seed": seed,
        "book_version": book_version,
    }
    return upsert_turn_row(LoreActivation, save_pk=save.pk, turn_id=turn_id, values=values)


def lore_activation_rollback(*, save, target_turn: int) -> int:
    """Delete the activation rows after `target_turn`; return how many. Run inside the rewind's transaction."""
    deleted, _ = LoreActivation.objects.filter(game_save=save, turn_id__gt=target_turn).delete()
    return deleted


def book_version_for(universe) -> str:
    """A key that changes whenever an entry of the book is created, edited or deleted."""
    stats = universe.lore_entries.aggregate(newest=Max("updated_at"), top=Max("id"), total=Count("id"))
    newest = stats["newest"].isoformat() if stats["newest"] else "-"
    return f"universe-{universe.pk}:{stats['total']}:{stats['top']}:{newest}"


def universe_book(
    universe, *, defaults: LoreDefaults | None = None, macros: dict[str, str] | None = None, version: str | None = None
) -> CompiledBook:
    """The universe's compiled book, built on first use of this book version, then cached.

    Play, the key tester and the health page all come here, so they evaluate the same book
    (the same specs in the same order) for the same version.
    """
    if defaults is None:
        defaults = defaults_from_meta(universe.meta_values())
    return compiled_book(
        version=version or book_version_for(universe),
        defaults=defaults,
        macros=macros,
        loader=lambda: [spec_from_entry(e) for e in universe.lore_entries.defer("extensions").order_by("pk")],
    )


def history_turns(book: CompiledBook) -> int:
    """How many past turns the deepest scan of this book reaches (two messages a turn)."""
    deepest = max([book.defaults.scan_depth, *[s.scan_depth or 0 for s in book.specs]])
    return min(HISTORY_TURNS_CAP, deepest // 2 + 1)


def lore_macros_for(save) -> dict[str, str]:
    """Return the macro values keys are matched with: `studio.memory.recall.macros.macro_names`, nothing in focus."""
    return macro_names(universe=save.universe, save=save).as_dict()


def lore_activation_record_turn(*, save, turn_id: int, player_input: str) -> LoreActivation | None:
    """Evaluate and record turn `turn_id` (being appended with `player_input`); None for a book with no entries.

    Run inside the append's transaction, after the turns before it are in the Event_Log.
    """
    if not save.universe.lore_entries.exists():
        return None
    result, extra = lore_activation_for_turn(
        save=save, pending_input=player_input, turn_id=turn_id, macros=lore_macros_for(save)
    )
    return record_activation(save=save, turn_id=turn_id, result=result, **extra)


@transaction.atomic
def lore_activation_replay(*, save, from_turn: int = 1) -> int:
    """Recompute the activation rows of turns `from_turn`..current from the Event_Log; return how many.

    Each turn is evaluated from the state the turn before left, with the save's seeds, so on
    an unchanged book a replay writes back exactly the rows play recorded.
    """
    from studio.world.models import Event

    LoreActivation.objects.filter(game_save=save, turn_id__gt=save.current_turn).delete()
    LoreActivation.objects.filter(game_save=save, turn_id__gte=from_turn).delete()
    if not save.universe.lore_entries.exists():
        return 0
    macros = lore_macros_for(save)
    count = 0
    for turn_id, player_input in (
        Event.objects.filter(game_save=save, turn_id__gte=from_turn)
        .order_by("turn_id")
        .values_list("turn_id", "player_input")
    ):
        result, extra = lore_activation_for_turn(save=save, pending_input=player_input, turn_id=turn_id, macros=macros)
        record_activation(save=save, turn_id=turn_id, result=result, **extra)
        count += 1
    return count


def lore_activation_for_turn(
    *, save, pending_input: str, turn_id: int | None = None, macros: dict[str, str] | None = None
) -> tuple[ActivationResult, dict[str, Any]]:
    """Evaluate the save's Lore Book for `turn_id` (default: the next turn); write nothing.

    Return the result and what `record_activation` needs (`seed`, `book_version`).
    """
    from studio.world.models import Event  # the engine reads the Event_Log it is given

    turn_id = turn_id if turn_id is not None else save.current_turn + 1
    version = book_version_for(save.universe)
    book = universe_book(save.universe, macros=macros, version=version)
    turns = list(
        Event.objects.filter(game_save=save, turn_id__lt=turn_id)
        .order_by("-turn_id")
        .values_list("turn_id", "player_input", "narrative")[: history_turns(book)]
    )
    seed = lore_seed_for(save=save, turn_id=turn_id)
    result = activate(
        book=book,
        messages=scan_messages(pending_input=pending_input, turns=turns),
        turn=turn_id,
        state=activation_state_as_of(save=save, turn_id=turn_id - 1),
        seed=seed,
    )
    return result, {"seed": seed, "book_version": version}
