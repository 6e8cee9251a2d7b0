"""Who `{{user}}` and `{{char}}` are, and filling them in what a narrator receives.

SillyTavern, Character Card V2/V3 editors and NovelAI-style books write the player as
`{{user}}` and the character a card or entry speaks for as `{{char}}`; the macros are
case-insensitive (`{{User}}` works) and the legacy `<USER>` / `<BOT>` / `<CHAR>` forms are
still found in older cards. The studio stores text unchanged and fills the macros only in
what a narrator receives (the memory context and the narrator prompt), so an edit of the
player character's name never rewrites the Lore Book.

The rule, as SillyTavern has it (the one answer play, the key tester, the living pipeline
and the narrator all take from `macro_names`):

- `{{user}}` is the player's persona: the `player_character` meta value. Meta is read
  live from the universe over the save's copy made at creation (`play_meta`), so an edit
  of the universe applies to the next turn, as the narrator's instructions do.
- `{{char}}` is the card's character: the name of the universe's imported Character Card
  (the `character_card` meta key). A universe without a card has no fixed character: then
  `{{char}}` is the first character in focus that is not the player (a focus term, else a
  character the input names), as SillyTavern's group chats fill it with the character
  whose turn it is. Lore keys are matched before anything is in focus, so for them a
  universe without a card leaves `{{char}}` as written.

An empty name leaves its macro as it is: a visible `{{char}}` in a prompt preview is a
better hint than a silent blank.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

PLAYER_CHARACTER_META = "player_character"
CHARACTER_CARD_META = "character_card"

_USER = re.compile(r"\{\{\s*user\s*\}\}|<USER>", re.IGNORECASE)
_CHAR = re.compile(r"\{\{\s*char\s*\}\}|<BOT>|<CHAR>", re.IGNORECASE)


def fill_macros(text: str, *, user: str | None = None, char: str | None = None) -> str:
    """Return `text` with `{{user}}` replaced by `user` and `{{char}}` by `char` (when given)."""
    if not text or "{" not in text and "<" not in text:
        return text or ""
    if user:
        text = _USER.sub(lambda _m: user, text)
    if char:
        text = _CHAR.sub(lambda _m: char, text)
    return text


def has_macros(text: str) -> bool:
    """Return True when `text` holds a `{{user}}` or `{{char}}` macro (any spelling)."""
    return bool(text) and bool(_USER.search(text) or _CHAR.search(text))


@dataclass(frozen=True)
class MacroNames:
    """Who `{{user}}` and `{{char}}` are for one narration ("" when nobody is)."""

    user: str = ""
    char: str = ""

    def as_dict(self) -> dict[str, str]:
        """Return the names that are set, keyed `user` / `char` (the lore engine's macro map)."""
        return {name: value for name, value in (("user", self.user), ("char", self.char)) if value}

    def fill(self, text: str) -> str:
        """Return `text` with both macros filled (a macro whose name is empty stays as written)."""
        return fill_macros(text, user=self.user or None, char=self.char or None)


def card_character_name(meta: Mapping[str, str]) -> str:
    """Return the name of the universe's imported Character Card ("" without one).

    The card import stores `{"entry_id", "name", "spec"}`; older universes hold the whole
    card (`data.name`, or a V1 card's top-level `name`).
    """
    try:
        card = json.loads(meta.get(CHARACTER_CARD_META) or "")
    except (TypeError, ValueError):
        return ""
    if not isinstance(card, dict):
        return ""
    data = card.get("data") if isinstance(card.get("data"), dict) else card
    name = data.get("name")
    return name.strip() if isinstance(name, str) else ""


def macro_names_from_meta(meta: Mapping[str, str], *, focus: Iterable[str] = ()) -> MacroNames:
    """Return who `{{user}}` / `{{char}}` are for this meta and these characters in focus (see the module)."""
    user = str(meta.get(PLAYER_CHARACTER_META) or "").strip()
    char = card_character_name(meta)
    if not char:
        char = next((name.strip() for name in focus
                     if name and name.strip() and name.strip().casefold() != user.casefold()), "")
    return MacroNames(user=user, char=char)


def play_meta(*, universe, save=None, universe_meta: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return the meta play reads: the universe's current meta over the save's copy made at creation.

    `universe_meta`: the universe's meta already read by the caller (then nothing is queried).
    """
    if universe_meta is None:
        universe_meta = dict(universe.meta.values_list("key", "value"))
    meta = {str(k): str(v) for k, v in ((save.meta or {}) if save is not None else {}).items()}
    meta.update({str(k): str(v) for k, v in universe_meta.items()})
    return meta


def macro_names(*, universe, save=None, focus: Iterable[str] = ()) -> MacroNames:
    """Return who `{{user}}` and `{{char}}` are in `universe` (as played in `save`), `focus` in scene."""
    return macro_names_from_meta(play_meta(universe=universe, save=save), focus=focus)
