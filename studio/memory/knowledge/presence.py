"""Presence per turn: who is in the scene, where it came from, and how it carries.

Sources, in order of authority (`PRESENCE_AUTHORITY`): the game engine's turn state
(`state["present"]`: a list of names), the playtester (the presence picker), the living-mode
extractor (it names who is present), and the carry from the previous turn. An automatic
write (extractor, carry) never replaces a row of higher authority; the playtester's edit
replaces any row of its turn.

The carry: a turn appended without `present` gets the previous turn's characters (source
`carried`) unless the scene changed. The scene is the state's `location` (or `scene`) key;
a turn whose state names a different location than the previous turn's row starts a new
scene: its row is written with nobody in it (source `carried`, the new scene kept), so
nothing carries across the change. A state without a location keeps the previous scene.
An edit (playtester or extractor) at turn T re-carries forward: the `carried` rows after T
take T's characters until the first row of another source or another scene.

Every write here runs inside the caller's transaction (`turn_append`'s, or one taken with
the save's row locked), so the rows and the turn they describe commit together.
"""

from __future__ import annotations

from django.db import transaction

from studio import limits
from studio.memory.knowledge.models import PRESENCE_AUTHORITY, Presence, PresenceSource
from studio.memory.knowledge.names import CharacterIndex, character_index
from studio.memory.turn_rows import turns_q, upsert_turn_row

__all__ = [
    "PRESENT_KEY",
    "SCENE_KEYS",
    "presence_state_errors",
    "presence_record_turn",
    "presence_set",
    "presence_from_extractor",
    "presence_at",
    "presence_by_turn",
    "scene_of",
]

PRESENT_KEY = "present"
SCENE_KEYS = ("location", "scene")
MAX_PRESENT = 100


def scene_of(state) -> str:
    """Return the scene a turn's state names (its `location`, else `scene`), "" when none."""
    if not isinstance(state, dict):
        return ""
    for key in SCENE_KEYS:
        value = state.get(key)
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())[:300]
    return ""


def presence_state_errors(state) -> list[str]:
    """Return what is wrong with a state's `present` key ([] when absent or well formed)."""
    if not isinstance(state, dict) or PRESENT_KEY not in state:
        return []
    value = state[PRESENT_KEY]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return ["state.present must be a list of character names (strings)"]
    if len(value) > MAX_PRESENT:
        return [f"state.present names {len(value)} characters; at most {MAX_PRESENT}"]
    problems = [limits.CHARACTER_NAME.problem(v) for v in value]
    return [f"state.present: a character name {problem}" for problem in problems if problem][:1]


def presence_record_turn(*, save, turn_id: int, state, index: CharacterIndex | None = None) -> Presence | None:
    """Record turn `turn_id`'s presence from its state, or carry the previous turn's (see the module).

    Raise ValueError (the caller's transaction writes nothing) for a malformed `present`.
    Return the row written, or None when there is nothing to record.
    """
    errors = presence_state_errors(state)
    if errors:
        raise ValueError("; ".join(errors))
    previous = Presence.objects.filter(game_save_id=save.pk, turn_id=turn_id - 1).first()
    scene = scene_of(state)
    if isinstance(state, dict) and PRESENT_KEY in state:
        index = index or character_index(save.universe, save=save)
        characters, source = index.resolve_all(state[PRESENT_KEY]), PresenceSource.STATE
        scene = scene or (previous.scene if previous else "")
    elif previous is None:
        if not scene:
            return None
        characters, source = [], PresenceSource.CARRIED
    elif scene and previous.scene and scene != previous.scene:
        characters, source = [], PresenceSource.CARRIED  # a new scene: nobody carries into it
    else:
        characters, source, scene = list(previous.characters), PresenceSource.CARRIED, scene or previous.scene
    values = {"characters": characters, "source": source, "scene": scene}
    return upsert_turn_row(Presence, save_pk=save.pk, turn_id=turn_id, values=values)


def _recarry(save_pk: int, start: Presence, last_turn: int) -> int:
    """Carry `start`'s characters into the `carried` rows after it, up to another source or scene."""
    rows = {
        r.turn_id: r
        for r in Presence.objects.filter(game_save_id=save_pk, turn_id__gt=start.turn_id, turn_id__lte=last_turn)
    }
    changed = 0
    for turn in range(start.turn_id + 1, last_turn + 1):
        row = rows.get(turn)
        if row is None:
            break  # no row: the turn was appended with nothing to carry; leave it unknown
        if row.source != PresenceSource.CARRIED or (row.scene and start.scene and row.scene != start.scene):
            break
        if row.characters != start.characters:
            row.characters = list(start.characters)
            row.save(update_fields=["characters"])
            changed += 1
    return changed


def presence_set(
    *,
    game_save,
    turn_id: int,
    characters: list[str],
    source: str = PresenceSource.PLAYTESTER,
    index: CharacterIndex | None = None,
) -> Presence:
    """Set who is present at `turn_id` (names resolved), then re-carry it forward; one transaction.

    Raise ValueError for a turn the save does not hold or a malformed list.
    """
    from studio.world.models import Save

    if not isinstance(characters, list) or not all(isinstance(c, str) for c in characters):
        raise ValueError("characters must be a list of names")
    if len(characters) > MAX_PRESENT:
        raise ValueError(f"at most {MAX_PRESENT} characters")
    for name in characters:
        limits.CHARACTER_NAME.check(name)  # limits.Refused (a ValueError) names the field
    index = index or character_index(game_save.universe, save=game_save)
    with transaction.atomic():
        locked = Save.objects.select_for_update().get(pk=game_save.pk)
        if not 1 <= turn_id <= locked.current_turn:
            raise ValueError(f"turn {turn_id} does not exist: the save's turns are 1..{locked.current_turn}")
        existing = Presence.objects.filter(game_save_id=locked.pk, turn_id=turn_id).first()
        if existing is not None and source != PresenceSource.PLAYTESTER:
            if PRESENCE_AUTHORITY[existing.source] > PRESENCE_AUTHORITY[source]:
                return existing
        scene = existing.scene if existing else ""
        if not scene:
            before = Presence.objects.filter(game_save_id=locked.pk, turn_id__lt=turn_id).order_by("-turn_id").first()
            scene = before.scene if before else ""
        values = {"characters": index.resolve_all(characters), "source": source, "scene": scene}
        row = upsert_turn_row(Presence, save_pk=locked.pk, turn_id=turn_id, values=values)
        _recarry(locked.pk, row, locked.current_turn)
    return row


def presence_from_extractor(*, game_save, turn_id: int, names: list[str]) -> Presence | None:
    """Record the extractor's presence for `turn_id` unless the state or the playtester set it."""
    names = [n for n in names or [] if isinstance(n, str) and n.strip()]
    if not names:
        return None
    return presence_set(game_save=game_save, turn_id=turn_id, characters=names, source=PresenceSource.EXTRACTOR)


def presence_at(save, turn_id: int) -> Presence | None:
    """Return the presence row of `turn_id` (None: nobody is known to be present)."""
    return Presence.objects.filter(game_save_id=save.pk, turn_id=turn_id).first()


def presence_by_turn(save, *, horizon: int | None = None, turn_ids=None) -> dict[int, Presence]:
    """Return {turn: row} of the save's presence up to `horizon`, or of the turns `turn_ids` (one query)."""
    rows = Presence.objects.filter(game_save_id=save.pk)
    if horizon is not None:
        rows = rows.filter(turn_id__lte=horizon)
    if turn_ids is not None:
        rows = rows.filter(turns_q(turn_ids))  # runs of turns by their bounds, not a parameter each
    return {r.turn_id: r for r in rows}
