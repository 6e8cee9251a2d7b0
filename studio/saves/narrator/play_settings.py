"""Read and change a save's play settings (author's note, sampler overrides) outside a form (the API).

The Console's page uses `PlaySettingsForm`; both check the same declared limits
(`studio/limits.py`: the author's note, its depth, the sampler ranges), and a value refused
leaves every setting as it was.
"""

from __future__ import annotations

from django.db import transaction

from studio import limits
from studio.saves.models import PlaySettings
from studio.world.models import Save
from studio.saves.narrator.authors_note import play_settings_of
from studio.saves.narrator.sampler import FIELDS, resolve_sampler

# Each play setting and the declared limit it is checked with (studio/limits.py).
PLAY_FIELDS = {
    "authors_note": limits.AUTHORS_NOTE.field,
    "authors_note_depth": limits.AUTHORS_NOTE_DEPTH.field,
    **{name: limits.SAMPLER[name].field for name in FIELDS},
}


def play_settings_read(*, game_save: Save) -> dict:
    """Return the save's author's note, its own sampler overrides and what the next narration is sent."""
    row = play_settings_of(game_save)
    sampler = resolve_sampler(game_save=game_save)  # the same row: read once
    return {
        "authors_note": row.authors_note if row else "",
        "authors_note_depth": row.authors_note_depth if row else 1,
        "overrides": {name: getattr(row, name) if row else None for name in FIELDS},
        "effective": sampler.as_record(),
        "problems": list(sampler.problems),
    }


def play_settings_update(*, game_save: Save, changes: dict) -> dict:
    """Apply `changes` (any of authors_note, authors_note_depth and the sampler fields; None clears
    an override); raise ValueError naming the first bad value, nothing saved. Return the new state.

    The row is read under the save's lock and only the changed columns are written, so two
    requests changing different settings at once both keep their change.
    """
    for key, value in changes.items():
        if key == "authors_note" and value is None:
            continue
        if key not in PLAY_FIELDS:
            raise ValueError(
                f"{key}: not a play setting (expected authors_note, authors_note_depth, {', '.join(FIELDS)})."
            )
        limits.check(PLAY_FIELDS[key], value)  # Refused is a ValueError naming the field
    with transaction.atomic():
        Save.objects.select_for_update().only("pk").get(pk=game_save.pk)  # one writer of the row at a time
        row = PlaySettings.objects.filter(game_save=game_save).first() or PlaySettings(game_save=game_save)
        for key, value in changes.items():
            setattr(row, key, "" if key == "authors_note" and value is None else value)
        if row.pk is None:
            row.save()
        else:
            row.save(update_fields=[*changes, "updated_at"])
    game_save.play_settings = row  # what play_settings_read sees is what was saved
    return play_settings_read(game_save=game_save)
