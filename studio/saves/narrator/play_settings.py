"""Read and change a save's play settings (author's note, sampler overrides) outside a form (the API).

The Console's page uses `PlaySettingsForm`; both check the same ranges (`sampler.RANGES`,
`authors_note.MAX_DEPTH` / `MAX_NOTE_CHARS`), and a value refused leaves every setting as it was.
"""
from __future__ import annotations

from studio.saves.models import PlaySettings, Save
from studio.saves.narrator.authors_note import MAX_DEPTH, MAX_NOTE_CHARS, play_settings_of
from studio.saves.narrator.sampler import FIELDS, InvalidSampler, parse_value, resolve_sampler


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
    an override); raise ValueError naming the first bad value, nothing saved. Return the new state."""
    row = PlaySettings.objects.filter(game_save=game_save).first() or PlaySettings(game_save=game_save)
    for key, value in changes.items():
        if key == "authors_note":
            if value is None:
                value = ""
            if not isinstance(value, str) or len(value) > MAX_NOTE_CHARS or "\x00" in value:
                raise ValueError(f"authors_note: a text of at most {MAX_NOTE_CHARS} characters.")
            row.authors_note = value
        elif key == "authors_note_depth":
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DEPTH:
                raise ValueError(f"authors_note_depth: a whole number from 0 to {MAX_DEPTH}.")
            row.authors_note_depth = value
        elif key in FIELDS:
            if isinstance(value, bool) or (value is not None and not isinstance(value, (int, float))):
                raise ValueError(f"{key}: a number, or null to use the universe's or the environment's.")
            try:
                setattr(row, key, parse_value(key, value))
            except InvalidSampler as exc:
                raise ValueError(f"{key}: {exc}") from exc
        else:
            raise ValueError(f"{key}: not a play setting (expected authors_note, authors_note_depth, {', '.join(FIELDS)}).")
    row.save()
    game_save.play_settings = row  # what play_settings_read sees is what was saved
    return play_settings_read(game_save=game_save)
