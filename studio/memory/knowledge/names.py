"""Names to characters: the one rule that turns a name in a state, a form or an extraction
into the canonical name a presence row, a reveal and a `known_by` list compare on.

A name resolves to a Lore Book Character entry when it equals (case-insensitively, spaces
trimmed) the entry's title or one of its plain keys (aliases; regex keys and keys holding
macros are not names). The player character (`player_character` meta) resolves to itself,
and the index says whether the player is on scene in every turn they act in
(`pov_player_on_scene`, `ContextPolicy.player_on_scene`; on unless turned off).
A name that resolves to nothing is kept as given, trimmed: a character the book does not
describe can still be present and know things.

`known_by` items resolve further: a Character entry is that character; any other entry (a
faction, a place, a group) stands for the characters linked to it or linking to it in the
Lore Book ("Mira" links to "The Night Watch": Mira is in the Night Watch); a name that
resolves to no entry matches a character of that name.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from studio.memory.recall.macros import macro_names_from_meta, play_meta
from studio.memory.recall.policy import DEFAULT_POLICY, meta_values


def fold(name: str) -> str:
    return " ".join(str(name or "").split()).casefold()


def _plain_keys(keys) -> list[str]:
    return [k for k in keys or [] if isinstance(k, str) and k.strip() and "{{" not in k and not k.startswith("/")]


@dataclass
class CharacterIndex:
    """The universe's characters by every name they answer to, and its groups by name."""

    characters: dict[str, str] = field(default_factory=dict)  # folded name or key -> canonical title
    titles: list[str] = field(default_factory=list)  # the canonical names, book order
    groups: dict[str, tuple[str, set[str]]] = field(default_factory=dict)  # folded name -> (title, members)
    entry_titles: dict[str, str] = field(default_factory=dict)  # entry_id -> title
    player: str = ""
    player_on_scene: bool = DEFAULT_POLICY.player_on_scene  # the player witnesses every turn they act in

    def resolve(self, name: str) -> str:
        """Return the canonical name of `name` (a character's title, else `name` trimmed)."""
        cleaned = " ".join(str(name or "").split())
        return self.characters.get(fold(cleaned), cleaned)

    def resolve_all(self, names: Iterable[str]) -> list[str]:
        """Return the canonical names of `names`, in order, without blanks or repeats."""
        out: list[str] = []
        for name in names or []:
            canonical = self.resolve(name)
            if canonical and fold(canonical) not in {fold(o) for o in out}:
                out.append(canonical)
        return out

    def members(self, item: str) -> tuple[set[str], str]:
        """Return the characters a `known_by` item names and how ("" = a character by name)."""
        key = fold(item)
        if key in self.characters:
            return {fold(self.characters[key])}, ""
        if key in self.groups:
            title, members = self.groups[key]
            return set(members), title
        return {key}, ""

    def is_known(self, name: str) -> bool:
        """Whether `name` is a character the universe knows: the player, a Character entry's title or alias."""
        return fold(name) in self.characters

    def all_characters(self) -> list[str]:
        """Return the player character, then the book's characters (the presence picker's list)."""
        names = [self.player] if self.player else []
        return names + [t for t in self.titles if fold(t) != fold(self.player)]

    def mentioned_in(self, text: str) -> list[str]:
        """Return the characters `text` names by title or key, as whole words, in book order."""
        import re

        found = []
        for folded, title in self.characters.items():
            if re.search(rf"(?<!\w){re.escape(folded)}(?!\w)", text or "", flags=re.IGNORECASE) and title not in found:
                found.append(title)
        order = {fold(t): i for i, t in enumerate(self.all_characters())}
        return sorted(found, key=lambda t: order.get(fold(t), 10**6))


def character_index(universe, *, save=None, universe_meta=None) -> CharacterIndex:
    """Return the `CharacterIndex` of `universe` (two queries: entries, links)."""
    from studio.universes.models import LoreEntry

    index = CharacterIndex()
    entries = list(LoreEntry.objects.filter(universe=universe).values_list("pk", "entry_id", "title", "kind", "keys"))
    by_pk = {pk: (entry_id, title, kind, keys) for pk, entry_id, title, kind, keys in entries}
    index.entry_titles = {entry_id: title for entry_id, title, _kind, _keys in by_pk.values()}
    for _entry_id, title, kind, keys in by_pk.values():
        if kind != "character":
            continue
        index.titles.append(title)
        for name in (title, *_plain_keys(keys)):
            index.characters.setdefault(fold(name), title)
    meta = play_meta(universe=universe, save=save, universe_meta=universe_meta)
    index.player_on_scene = meta_values(meta).get("player_on_scene", DEFAULT_POLICY.player_on_scene)
    player = macro_names_from_meta(meta).user
    if player:
        index.player = index.resolve(player)
        index.characters.setdefault(fold(player), index.player)
    links = LoreEntry.links.through.objects.filter(from_loreentry__universe=universe).values_list(
        "from_loreentry_id", "to_loreentry_id"
    )
    members: dict[int, set[str]] = {}
    for a, b in links:
        for group, other in ((a, b), (b, a)):
            if group in by_pk and other in by_pk and by_pk[group][2] != "character" and by_pk[other][2] == "character":
                members.setdefault(group, set()).add(fold(by_pk[other][1]))
    for pk, (entry_id, title, kind, keys) in by_pk.items():
        if kind == "character":
            continue
        for name in (title, entry_id, *_plain_keys(keys)):
            index.groups.setdefault(fold(name), (title, members.get(pk, set())))
    return index
