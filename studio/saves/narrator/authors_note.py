"""The author's note: a save's text put into the narrator's prompt at a depth.

The narrator's user message is a list of sections (the memory, as the renderer prints it, the
player's action, the closing "Narrate turn N." instruction). The note is inserted as its own
section, `depth` sections from the end, as SillyTavern counts its "in-chat @ depth": depth 0
puts it after the closing instruction (last thing the model reads), 1 just before it (the
default), 2 before the player's action, 3 or more before the memory (never inside it).

The note is filled with the `{{user}}` / `{{char}}` macros like the rest of the message.
What a narration used is kept on its alternative and its turn's snapshot (`play_settings`).
"""

from __future__ import annotations

from studio import limits

NOTE_HEADING = "## Author's note"
MAX_NOTE_CHARS = limits.AUTHORS_NOTE.max_chars
MAX_DEPTH = int(limits.AUTHORS_NOTE_DEPTH.high)


def insert_at_depth(sections: list[str], text: str, depth: int) -> list[str]:
    """Return `sections` with `text` inserted `depth` sections from the end (clamped); unchanged for no text."""
    text = (text or "").strip()
    if not text:
        return list(sections)
    depth = max(0, int(depth))
    index = max(0, len(sections) - depth)
    return [*sections[:index], f"{NOTE_HEADING}\n{text}", *sections[index:]]


def play_settings_of(game_save):
    """Return the save's `PlaySettings` row, or None: the one read of it every reader uses.

    Through the save's reverse one-to-one accessor, which Django caches on the instance (a
    missing row too): a narration reads the row once however many of its parts ask (the
    prompt's note, the sampler, what the alternative keeps), and a caller that loads the save
    with `select_related("play_settings")` reads it in that query. A writer that saves another
    instance of the row sets the accessor (`game_save.play_settings = row`).
    """
    from studio.saves.models import PlaySettings

    if getattr(game_save, "pk", None) is None:
        return None
    try:
        return game_save.play_settings
    except PlaySettings.DoesNotExist:
        return None


def note_of(game_save) -> tuple[str, int]:
    """Return the save's author's note and depth ("" when it has none)."""
    row = play_settings_of(game_save)
    if row is None:
        return "", 1
    return (row.authors_note or "").strip(), row.authors_note_depth


def with_authors_note(sections: list[str], game_save) -> list[str]:
    """Return the prompt's sections with the save's author's note inserted (the prompt's hook)."""
    text, depth = note_of(game_save)
    return insert_at_depth(sections, text, depth)
