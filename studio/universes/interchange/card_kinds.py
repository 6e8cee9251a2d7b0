"""What a card's book entry says about itself: its title as the card writes it, and its kind.

A `character_book` entry has no kind field in the spec, but cards say it in their own
words, and the import takes it from there (the import's default kind applies only where
the card says nothing):

1. the studio's own `extensions.axiom.kind` (a card exported by the studio), read by the
   parser itself;
2. a kind field other tools write into the entry's `extensions` (`kind`, `category`,
   `type`, `entry_type`), when its value names a kind;
3. a label before the title, as authors write it in `name` / `comment`: "Character: Mira",
   "[Place] Harbour", "Location - The Reach" (the title stays as the card writes it);
4. the card's own character: an entry whose title or one of whose keys is the card's
   `name` is that character.

A title the card does not write (no `name` or `comment`) falls back to the first key; keys
are often lowercase for matching, so the title takes the key's spelling in the entry's
own content when it appears there ("glass bell" -> "Glass Bell"), else the key with its
first letter raised; a key that is a pattern ("drag(on|ons)") is kept as written.
"""

from __future__ import annotations

import re
from typing import Any

from studio.world.models import LoreKind

# Words cards use for each kind (casefolded), the studio's kind names included.
KIND_WORDS: dict[str, str] = {
    **{
        word: LoreKind.CHARACTER
        for word in ("character", "characters", "char", "person", "people", "npc", "npcs", "persona", "creature")
    },
    **{
        word: LoreKind.PLACE
        for word in ("place", "places", "location", "locations", "area", "region", "city", "town", "setting")
    },
    **{
        word: LoreKind.FACTION
        for word in ("faction", "factions", "group", "organization", "organisation", "guild", "clan", "house")
    },
    **{word: LoreKind.ITEM for word in ("item", "items", "object", "objects", "artifact", "artefact", "weapon")},
    **{word: LoreKind.EVENT for word in ("event", "events", "history")},
    **{word: LoreKind.CONCEPT for word in ("concept", "concepts", "lore", "rule", "rules", "magic")},
}
EXTENSION_KIND_FIELDS = ("kind", "category", "type", "entry_type")
_LABEL = re.compile(
    r"^\s*(?:\[(?P<bracket>[^\]]{1,30})\]|(?P<word>[A-Za-z][A-Za-z ]{0,29}?)\s*(?::|\s[-\u2013\u2014]\s))\s*\S"
)


_PATTERN_MARKS = re.compile(r"[()\[\]|\\*+?^$/{}]")


def kind_word(value: Any) -> str:
    """Return the kind a card's word names ("Location" -> place), or ""."""
    return KIND_WORDS.get(value.strip().casefold(), "") if isinstance(value, str) else ""


def card_entry_kind(raw: dict[str, Any], *, title: str, keys: list[str], card_name: str = "") -> tuple[str, str]:
    """Return (kind, where the card says it) for a book entry, or ("", "") when the card says nothing."""
    extensions = raw.get("extensions") if isinstance(raw.get("extensions"), dict) else {}
    for field_name in EXTENSION_KIND_FIELDS:
        kind = kind_word(extensions.get(field_name))
        if kind:
            return kind, f"extensions.{field_name}"
    for field_name in ("name", "comment"):
        value = raw.get(field_name)
        match = _LABEL.match(value) if isinstance(value, str) else None
        if match:
            kind = kind_word(match.group("bracket") or match.group("word"))
            if kind:
                return kind, f"{field_name} label"
    name = card_name.strip().casefold()
    if name and (title.strip().casefold() == name or any(k.strip().casefold() == name for k in keys)):
        return LoreKind.CHARACTER, "the card's own character"
    return "", ""


def title_from_key(key: str, content: str) -> str:
    """Return a title for an entry known only by `key`: its spelling in `content`, else the key capitalised."""
    key = key.strip()
    if not key or _PATTERN_MARKS.search(key):
        return key  # a pattern, not a word: kept as written
    found = re.search(rf"(?<!\w){re.escape(key)}(?!\w)", content or "", re.IGNORECASE)
    if found and found.group(0) != found.group(0).lower():
        return found.group(0)
    return key[:1].upper() + key[1:]
