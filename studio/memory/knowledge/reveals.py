"""Reveal events: at turn N, a fact or a Lore Book entry becomes known to a character.

Written by the playtester (the turn page and the Who-knows-what page), the game engine (the
API, or a turn state's `reveals` key) and the living-mode extractor (a told fact's
listeners). A reveal is a row keyed by its turn: a rewind before N drops it, a fork copies
it with the fact remapped, a save file carries it.

Checks (ValueError, nothing written): the turn exists (1..current); the fact is the save's
and was extracted at or before the reveal's turn; the entry is in the save's Lore Book; the
character is named.
"""

from __future__ import annotations

from django.db import transaction

from studio import limits
from studio.memory.knowledge.models import Reveal, RevealSource
from studio.memory.knowledge.names import CharacterIndex, character_index

__all__ = ["REVEALS_KEY", "reveal_add", "reveal_delete", "reveals_up_to", "reveals_from_state", "reveal_state_errors"]

REVEALS_KEY = "reveals"


def reveal_add(
    *,
    game_save,
    turn_id: int,
    character: str,
    fact_id: int | None = None,
    entry_id: str = "",
    told_by: str = "",
    source: str = RevealSource.PLAYTESTER,
    index: CharacterIndex | None = None,
    locked: bool = False,
) -> Reveal:
    """Record that `character` learns fact `fact_id` or entry `entry_id` at `turn_id`; return the row."""
    from studio.memory.models import Fact
    from studio.world.models import LoreEntry, Save

    if bool(fact_id) == bool(entry_id):
        raise ValueError("a reveal names one fact or one lore entry")
    if not (character or "").strip():
        raise ValueError("a reveal names the character who learns it")
    limits.CHARACTER_NAME.check(character)  # limits.Refused (a ValueError) names the field
    if told_by:
        limits.CHARACTER_NAME.check(told_by)
    if source not in RevealSource.values:
        raise ValueError(f"unknown reveal source {source!r}")
    index = index or character_index(game_save.universe, save=game_save)
    with transaction.atomic():
        save = game_save if locked else Save.objects.select_for_update().get(pk=game_save.pk)
        current = save.current_turn if not locked else max(save.current_turn, turn_id)
        if not 1 <= int(turn_id) <= current:
            raise ValueError(f"turn {turn_id} does not exist: the save's turns are 1..{current}")
        if fact_id:
            fact = Fact.objects.filter(game_save_id=save.pk, pk=fact_id).first()
            if fact is None:
                raise ValueError(f"fact {fact_id} is not one of this save's facts")
            if fact.turn_id > int(turn_id):
                raise ValueError(f"fact {fact_id} is from turn {fact.turn_id}: it cannot be told at turn {turn_id}")
        elif not LoreEntry.objects.filter(universe_id=save.universe_id, entry_id=entry_id).exists():
            raise ValueError(f"no lore entry {entry_id!r} in this universe's Lore Book")
        return Reveal.objects.create(
            game_save_id=save.pk,
            turn_id=int(turn_id),
            fact_id=fact_id or None,
            entry_id=entry_id or "",
            character=index.resolve(character)[:200],
            told_by=index.resolve(told_by)[:200] if told_by else "",
            source=source,
        )


def reveal_delete(*, game_save, reveal_id: int) -> int:
    """Delete one of the save's reveals; return how many rows went (0 or 1)."""
    deleted, _ = Reveal.objects.filter(game_save_id=game_save.pk, pk=reveal_id).delete()
    return deleted


def reveals_up_to(save, *, horizon: int):
    """Return the save's reveals up to `horizon`, in turn order (a queryset)."""
    return Reveal.objects.filter(game_save_id=save.pk, turn_id__lte=horizon).order_by("turn_id", "id")


def reveal_state_errors(state) -> list[str]:
    """Return what is wrong with a state's `reveals` key ([] when absent or well formed).

    Shape: `[{"to": "Mira", "entry": "<entry id>" | "fact": <fact id>, "from": "Kael"}]`.
    """
    if not isinstance(state, dict) or REVEALS_KEY not in state:
        return []
    value = state[REVEALS_KEY]
    if not isinstance(value, list) or len(value) > 100:
        return ["state.reveals must be a list (at most 100) of {to, entry | fact, from}"]
    for i, item in enumerate(value):
        if not isinstance(item, dict) or not isinstance(item.get("to"), str) or not item["to"].strip():
            return [f"state.reveals[{i}] needs `to`: the character who learns it"]
        has_entry = isinstance(item.get("entry"), str) and item["entry"].strip()
        has_fact = isinstance(item.get("fact"), int) and not isinstance(item.get("fact"), bool)
        if bool(has_entry) == bool(has_fact):
            return [f"state.reveals[{i}] names one `entry` (a lore entry id) or one `fact` (a fact id)"]
        if "from" in item and not isinstance(item["from"], str):
            return [f"state.reveals[{i}].from must be a name"]
        for key in ("to", "from"):
            problem = limits.CHARACTER_NAME.problem(item[key]) if item.get(key) else ""
            if problem:
                return [f"state.reveals[{i}].{key}: a character name {problem}"]
    return []


def reveals_from_state(*, save, turn_id: int, state, index: CharacterIndex | None = None) -> list[Reveal]:
    """Record the reveals a turn's state lists (inside `turn_append`'s transaction)."""
    errors = reveal_state_errors(state)
    if errors:
        raise ValueError("; ".join(errors))
    if not isinstance(state, dict) or not state.get(REVEALS_KEY):
        return []
    index = index or character_index(save.universe, save=save)
    return [
        reveal_add(
            game_save=save,
            turn_id=turn_id,
            character=item["to"],
            fact_id=item.get("fact"),
            entry_id=item.get("entry") or "",
            told_by=item.get("from") or "",
            source=RevealSource.STATE,
            index=index,
            locked=True,
        )
        for item in state[REVEALS_KEY]
    ]
