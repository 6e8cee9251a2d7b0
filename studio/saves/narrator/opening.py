"""The opening turn of a save: the universe's opening, else its imported Character Card's greetings.

- `universe_greetings` / `opening_greetings` / `card_greetings`: the greetings a story opens
  with (`universes/opening.py`: the universe's first message and alternate greetings), else
  its imported Character Card's, macros filled as play fills them.
- `opening_draft_create`: the Console's opening, a draft for turn 1 whose alternatives are
  the greetings (no model call); the player chooses one and accepts it (or picks one on the
  new-save form).
- `opening_accept`: the one check of the opening, for the API and the new-save form: append
  greeting N as turn 1.

A play control like those of play.py: it raises `play.PlayError` when it cannot be done.
"""

from __future__ import annotations

from django.db import transaction

from studio.plural import counted
from studio.saves.models import AlternativeStatus, DraftStatus, NarratorAlternative, NarratorDraft
from studio.saves.narrator.play import PlayError
from studio.world.models import Save

CARD_SOURCE = "character card"
OPENING_SOURCE = "the universe's opening"


class NoSuchGreeting(PlayError):
    """The opening asked for a greeting the card does not have (a bad request, not a conflict)."""


def opening_greetings(*, game_save: Save) -> list[str]:
    """Return the greetings a save can open with, macros filled: the universe's own opening, else its card's."""
    from studio.saves.narrator.prompt import narrator_meta

    return universe_greetings(universe=game_save.universe, meta=narrator_meta(game_save))[1]


def universe_greetings(*, universe, meta: dict[str, str] | None = None) -> tuple[str, list[str]]:
    """Return (source, greetings) a story of `universe` opens with, macros filled as play fills them.

    The universe's own opening (`universes/opening.py`) when it has a first message, else its
    imported Character Card's first message and alternate greetings; ("", []) without either.
    `meta`: what play reads (the save's `narrator_meta`; default: the universe's meta). The new-save
    form numbers its choices with this, so greeting N there is greeting N of `opening_accept`.
    """
    from studio.memory.recall.macros import macro_names_from_meta
    from studio.universes.opening import opening_from_meta

    meta = universe.meta_values() if meta is None else meta
    source, greetings = OPENING_SOURCE, opening_from_meta(meta).greetings
    if not greetings:
        source, greetings = CARD_SOURCE, _card_greetings(universe=universe, meta=meta)
    if not greetings:
        return "", []
    names = macro_names_from_meta(meta)
    return source, [names.fill(g.strip()) for g in greetings]


def card_greetings(*, game_save: Save) -> list[str]:
    """Return the universe's card's first message then its alternate greetings, macros filled ([] without a card)."""
    from studio.memory.recall.macros import macro_names_from_meta
    from studio.saves.narrator.prompt import narrator_meta

    meta = narrator_meta(game_save)
    names = macro_names_from_meta(meta)
    return [names.fill(g.strip()) for g in _card_greetings(universe=game_save.universe, meta=meta)]


def _card_greetings(*, universe, meta: dict[str, str]) -> list[str]:
    """The card's first message then its alternate greetings, as written ([] without a card)."""
    import json

    from studio.memory.recall.macros import CHARACTER_CARD_META
    from studio.world.models import LoreEntry

    try:
        card = json.loads(meta.get(CHARACTER_CARD_META) or "")
    except (TypeError, ValueError):
        return []
    if not isinstance(card, dict):
        return []
    data = None
    entry_id = card.get("entry_id")
    if isinstance(entry_id, str):
        entry = LoreEntry.objects.filter(universe=universe, entry_id=entry_id).first()
        extension = (entry.extensions or {}).get("character_card") if entry is not None else None
        data = extension.get("data") if isinstance(extension, dict) else None
    if not isinstance(data, dict):
        data = card.get("data") if isinstance(card.get("data"), dict) else card  # older universes: the whole card
    greetings = [data.get("first_mes")] + list(data.get("alternate_greetings") or [])
    return [g.strip() for g in greetings if isinstance(g, str) and g.strip()]


def opening_draft_create(*, game_save: Save) -> NarratorDraft:
    """Open a draft for turn 1 whose alternatives are the card's greetings (done, no model call)."""
    from studio.saves.narrator.prompt import narrator_meta

    source, greetings = universe_greetings(universe=game_save.universe, meta=narrator_meta(game_save))
    if not greetings:
        raise PlayError(
            "This universe has no opening (a first message on its Metadata page, or an imported Character "
            "Card's): narrate or write turn 1 instead."
        )
    with transaction.atomic():
        locked = Save.objects.select_for_update().get(pk=game_save.pk)
        if locked.current_turn != 0:
            raise PlayError(f"The opening is turn 1; this save is already at turn {locked.current_turn}.")
        NarratorDraft.objects.filter(game_save=locked, status=DraftStatus.OPEN).update(status=DraftStatus.DISCARDED)
        draft = NarratorDraft.objects.create(game_save=locked, turn_id=1, player_input="")
        NarratorAlternative.objects.bulk_create(
            [
                NarratorAlternative(draft=draft, number=n, status=AlternativeStatus.DONE, text=text, model=source)
                for n, text in enumerate(greetings, start=1)
            ]
        )
    return draft


def opening_accept(*, game_save: Save, number: int = 1):
    """Append the card's greeting `number` (1 = the first message) as turn 1; return the Event.

    The one check of the opening (the API and the Console call only this): raise PlayError
    without a card or when the save has turns already (TurnConflict from `turn_append` when
    another request appended meanwhile), NoSuchGreeting for a greeting the card does not have.
    """
    from studio.saves.services import turn_append

    greetings = opening_greetings(game_save=game_save)
    if not greetings:
        raise PlayError("This universe has no opening: no first message, and no Character Card with one.")
    if not 1 <= number <= len(greetings):
        raise NoSuchGreeting(f"The opening has {counted(len(greetings), 'greeting')}; there is no {number}.")
    if game_save.current_turn != 0:
        raise PlayError(f"The opening is turn 1; this save is already at turn {game_save.current_turn}.")
    return turn_append(game_save=game_save, player_input="", narrative=greetings[number - 1], expected_turn_id=1)
