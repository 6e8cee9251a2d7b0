"""Fill the `{{user}}` / `{{char}}` macros of lore and narrator text, the way card editors write them.

SillyTavern, Character Card V2/V3 editors and NovelAI-style books write the player as
`{{user}}` and the character a card or entry speaks for as `{{char}}`; the macros are
case-insensitive (`{{User}}` works) and the legacy `<USER>` / `<BOT>` / `<CHAR>` forms are
still found in older cards. The studio stores text unchanged and fills the macros only in
what a narrator receives (the memory context and the narrator prompt), so an edit of the
player character's name never rewrites the Lore Book.

An empty name leaves its macro as it is: a visible `{{char}}` in a prompt preview is a
better hint than a silent blank.
"""
from __future__ import annotations

import re

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
