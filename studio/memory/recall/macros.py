"""Who `{{user}}` and `{{char}}` are, and filling them in what a narrator receives.

SillyTavern, Character Card V2/V3 editors and NovelAI-style books write the player as
`{{user}}` and the character a card or entry speaks for as `{{char}}`; the macros are
case-insensitive (`{{User}}` works) and the legacy `<USER>` / `<BOT>` / `<CHAR>` forms are
still found in older cards. The studio stores text unchanged and fills the macros only in
what a narrator receives (the memory context and the narrator prompt), so an edit of the
player character's name never rewrites the Lore Book.

The rule, as SillyTavern has it (the one answer play, the key tester, the living pipeline
and the narrator all take from `macro_names`):

- `{{user}}` is the player's persona's name: the `player_character` meta value
  (`persona_from_meta`). The persona's description (`player_description`) is prose for the
  narrator alone, never a name: facts, entities and `{{user}}` carry the name only. An older
  universe's one-value `player_character` that reads as a name plus a description ("Ilya
  Voss, a young lighthouse-keeper's apprentice ...") is split here on every read
  (`split_player_character`), so old saves play with the name at once; the universes app
  writes the split back on first use (`persona_settle`), after which the author can fix it.
  Meta is read live from the universe over the save's copy made at creation (`play_meta`),
  so an edit of the universe applies to the next turn, as the narrator's instructions do.
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
from dataclasses import dataclass, field

PLAYER_CHARACTER_META = "player_character"
PLAYER_DESCRIPTION_META = "player_description"
PLAYER_PORTRAIT_META = "player_portrait"
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


# What ends a name in an old one-value `player_character`: a comma, a colon, a semicolon, an
# opening parenthesis or a spaced dash ("Ilya Voss, a young ...", "Mara — a smuggler").
_NAME_END = re.compile(r"\s*(?:[,;:(]|\s[-\u2013\u2014]\s)\s*")
_NAME_PARTICLES = {"de", "van", "von", "der", "den", "da", "di", "du", "del", "la", "le", "al", "bin", "ibn"}
_MAX_NAME_WORDS = 5
_MIN_UNMARKED_WORDS = 7  # without a separator, only a long value is read as name + description


def _name_like(words: list[str]) -> bool:
    capitalised = [w for w in words if w[:1].isupper()]
    return (
        0 < len(words) <= _MAX_NAME_WORDS
        and bool(capitalised)
        and all(w[:1].isupper() or w.casefold() in _NAME_PARTICLES for w in words)
    )


def split_player_character(value: str) -> tuple[str, str]:
    """Return (name, description) of an old one-value `player_character`; description "" when it is a name.

    "Ilya Voss, a young lighthouse-keeper's apprentice" gives ("Ilya Voss", "a young
    lighthouse-keeper's apprentice"); "Wren Halloway" stays a name. A value is split at the
    first comma, colon, semicolon, parenthesis or spaced dash after one to five capitalised
    words, or, when it has no such mark and at least seven words, after its leading
    capitalised words where a lowercase word begins ("Kael Dunmore who was a sailor once").
    """
    value = " ".join((value or "").split())
    if not value:
        return "", ""
    mark = _NAME_END.search(value)
    if mark is not None and mark.start() > 0:
        head, rest = value[: mark.start()].strip(), value[mark.end() :].strip()
        if mark.group(0).strip() == "(" and rest.endswith(")") and "(" not in rest:
            rest = rest[:-1].strip()
        if rest and _name_like(head.split()):
            return head, rest
    words = value.split()
    if mark is None and len(words) >= _MIN_UNMARKED_WORDS:
        leading = 0
        while leading < len(words) and words[leading][:1].isupper() and leading < _MAX_NAME_WORDS:
            leading += 1
        if leading and leading < len(words) and words[leading][:1].islower():
            return " ".join(words[:leading]), " ".join(words[leading:])
    return value, ""


@dataclass(frozen=True)
class Persona:
    """The player's persona: `{{user}}` is `name`; `description` is for the narrator alone.

    `split_from` is the old one-value `player_character` this persona was read from ("" when
    the meta already holds a name and a description, or when the value is only a name).
    `portrait` is the kept PNG's reference (`universes/portraits.py`), {} without one.
    """

    name: str = ""
    description: str = ""
    portrait: dict = field(default_factory=dict)
    split_from: str = ""


def persona_from_meta(meta: Mapping[str, str]) -> Persona:
    """Return the player's persona in this meta (see the module: an old one-value name is split)."""
    raw = str(meta.get(PLAYER_CHARACTER_META) or "").strip()
    description = str(meta.get(PLAYER_DESCRIPTION_META) or "").strip()
    portrait = {}
    try:
        loaded = json.loads(meta.get(PLAYER_PORTRAIT_META) or "")
        if isinstance(loaded, dict):
            portrait = loaded
    except (TypeError, ValueError):
        pass
    split_from = ""
    name = raw
    if raw and not description and PLAYER_DESCRIPTION_META not in meta:
        name, description = split_player_character(raw)
        split_from = raw if description else ""
    return Persona(name=name, description=description, portrait=portrait, split_from=split_from)


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
    user = persona_from_meta(meta).name
    char = card_character_name(meta)
    if not char:
        char = next(
            (name.strip() for name in focus if name and name.strip() and name.strip().casefold() != user.casefold()), ""
        )
    return MacroNames(user=user, char=char)


def play_meta(*, universe, save=None, universe_meta: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return the meta play reads: the universe's current meta over the save's copy made at creation.

    `universe_meta`: the universe's meta already read by the caller (then nothing is queried).
    """
    if universe_meta is None:
        universe_meta = universe.meta_values()
    meta = {str(k): str(v) for k, v in ((save.meta or {}) if save is not None else {}).items()}
    meta.update({str(k): str(v) for k, v in universe_meta.items()})
    return meta


def macro_names(
    *, universe, save=None, focus: Iterable[str] = (), universe_meta: dict[str, str] | None = None
) -> MacroNames:
    """Return who `{{user}}` and `{{char}}` are in `universe` (as played in `save`), `focus` in scene.

    `universe_meta`: the universe's meta already read by the caller (then nothing is queried)."""
    return macro_names_from_meta(play_meta(universe=universe, save=save, universe_meta=universe_meta), focus=focus)
