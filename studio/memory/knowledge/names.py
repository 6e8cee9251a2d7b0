"""Names to characters: the one rule that turns a name in a state, a form, a focus term or an
extraction into the canonical name a presence row, a reveal, a `known_by` list and the memory
context's focus compare on (`CharacterIndex.match`; `resolve` and `is_known` read it).

A name resolves to a Lore Book Character entry when it equals (case-insensitively, spaces
trimmed) the entry's title or one of its plain keys (aliases; regex keys and keys holding
macros are not names), or, failing that, a *part* of its title ("Tamsin" or "Reed" for
"Tamsin Reed": a word of the title that starts with a capital, not an article) that no other
character's title holds and that is no other entry's name. A name two characters answer to
(a shared part, a shared key) resolves to neither: `match` says which characters it could be
(`NameMatch.candidates`) and every caller keeps it as given, never guessing. A title beats
another entry's key of the same spelling. The player character (`player_character` meta)
resolves to itself (a part of their name too, when no entry describes them), and the index
says whether the player is on scene in every turn they act in (`pov_player_on_scene`,
`ContextPolicy.player_on_scene`; on unless turned off).
A name that resolves to nothing is kept as given, trimmed: a character the book does not
describe can still be present and know things. Free text (an action, a narration) is scanned
for titles and keys only (`mentioned_in`): a surname in prose is too often a common word
("Reed", "Crane").

`known_by` items resolve further: a Character entry is that character; any other entry (a
faction, a place, a group) stands for the characters linked to it or linking to it in the
Lore Book ("Mira" links to "The Night Watch": Mira is in the Night Watch); a name that
resolves to no entry matches a character of that name.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from studio.memory.recall.macros import macro_names_from_meta, play_meta
from studio.memory.recall.policy import DEFAULT_POLICY, meta_values


def fold(name: str) -> str:
    return _fold(name) if isinstance(name, str) else " ".join(str(name or "").split()).casefold()


@functools.lru_cache(maxsize=16384)  # the guard folds the same few names for each of thousands of turns
def _fold(name: str) -> str:
    return " ".join(name.split()).casefold()


def _plain_keys(keys) -> list[str]:
    return [k for k in keys or [] if isinstance(k, str) and k.strip() and "{{" not in k and not k.startswith("/")]


# Words of a title that never name a character alone ("The Ferryman" is not "the").
NOT_NAME_PARTS = frozenset({"the", "a", "an"})
_PART_EDGES = "\"'“”‘’«»()[]{}.,;:!?"


def title_parts(title: str) -> list[str]:
    """Return the words of a multi-word title that may name its character alone: first name, surname
    ("Tamsin", "Reed"), each starting with a capital (or a letter of a script without case), not an article."""
    words = [w.strip(_PART_EDGES) for w in str(title or "").split()]
    if len(words) < 2:
        return []
    return [
        word
        for word in words
        if len(word) > 1 and word[0].isalpha() and not word[0].islower() and word.casefold() not in NOT_NAME_PARTS
    ]


@dataclass(frozen=True)
class NameMatch:
    """What one name resolves to (`CharacterIndex.match`): one character and how, several (ambiguous), or none."""

    name: str  # as given, spaces trimmed
    title: str = ""  # the character's canonical name ("" when it resolves to none, or to more than one)
    entry_id: str = ""  # the Character entry ("" for the player without one)
    by: str = ""  # how: "its title", "one of its keys", "a part of its title", "the player character"
    candidates: tuple[str, ...] = ()  # the characters an ambiguous name could be, book order

    @property
    def ambiguous(self) -> bool:
        return len(self.candidates) > 1

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "title": self.title,
            "entry_id": self.entry_id,
            "by": self.by,
            "candidates": list(self.candidates),
        }


BY_TITLE, BY_KEY, BY_PART, BY_PLAYER = "its title", "one of its keys", "a part of its title", "the player character"


@dataclass
class CharacterIndex:
    """The universe's characters by every name they answer to, and its groups by name."""

    characters: dict[str, str] = field(default_factory=dict)  # folded title or key -> canonical title (unambiguous)
    titles: list[str] = field(default_factory=list)  # the canonical names, book order
    groups: dict[str, tuple[str, set[str]]] = field(default_factory=dict)  # folded name -> (title, members)
    entry_titles: dict[str, str] = field(default_factory=dict)  # entry_id -> title
    character_entries: dict[str, str] = field(default_factory=dict)  # a Character entry's id -> its title, book order
    player: str = ""
    player_on_scene: bool = DEFAULT_POLICY.player_on_scene  # the player witnesses every turn they act in
    ambiguous: dict[str, tuple[str, ...]] = field(default_factory=dict)  # folded key two characters share -> them
    parts: dict[str, tuple[str, ...]] = field(default_factory=dict)  # folded part of a title -> the titles holding it
    spellings: dict[str, str] = field(default_factory=dict)  # folded name, key or part -> as the book writes it

    def match(self, name: str) -> NameMatch:
        """Return what `name` resolves to (the module's rule): a title or key, else a unique part of a title."""
        cleaned = " ".join(str(name or "").split())
        key = cleaned.casefold()
        if not key:
            return NameMatch(cleaned)
        title = self.characters.get(key)
        if title is not None:
            by = BY_TITLE if fold(title) == key else BY_KEY
            if title == self.player and title not in self.titles:
                by = BY_PLAYER
            return NameMatch(cleaned, title=title, entry_id=self._entry_of(title), by=by)
        owners = self.ambiguous.get(key) or self.parts.get(key, ())
        if len(owners) == 1:
            return NameMatch(cleaned, title=owners[0], entry_id=self._entry_of(owners[0]), by=BY_PART)
        return NameMatch(cleaned, candidates=tuple(owners))

    def _entry_of(self, title: str) -> str:
        return next((entry_id for entry_id, t in self.character_entries.items() if t == title), "")

    def names_of(self, title: str) -> list[str]:
        """Return every name that resolves to the character `title` (`match`): its title first, then its keys
        and the parts of its title no one else holds, as the book writes them."""
        names = {fold(title): title}
        for key, owner in self.characters.items():
            if owner == title:
                names.setdefault(key, self.spellings.get(key, key))
        for key, owners in self.parts.items():
            if owners == (title,):
                names.setdefault(key, self.spellings.get(key, key))
        return list(names.values())

    def resolve(self, name: str) -> str:
        """Return the canonical name of `name` (a character's title, else `name` trimmed)."""
        found = self.match(name)
        return found.title or found.name

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
        found = self.match(item)
        if found.title:
            return {fold(found.title)}, ""
        key = fold(item)
        if key in self.groups:
            title, members = self.groups[key]
            return set(members), title
        return {key}, ""

    def is_known(self, name: str) -> bool:
        """Whether `name` is a character the universe knows: the player, a Character entry's title, alias or a
        part of its title no other character shares."""
        return bool(self.match(name).title)

    def all_characters(self) -> list[str]:
        """Return the player character, then the book's characters (the presence picker's list)."""
        names = [self.player] if self.player else []
        return names + [t for t in self.titles if fold(t) != fold(self.player)]

    def mentioned_in(self, text: str) -> list[str]:
        """Return the characters `text` names by title or key, as whole words, in book order."""
        found = []
        for folded, title in self.characters.items():
            if re.search(rf"(?<!\w){re.escape(folded)}(?!\w)", text or "", flags=re.IGNORECASE) and title not in found:
                found.append(title)
        order = {fold(t): i for i, t in enumerate(self.all_characters())}
        return sorted(found, key=lambda t: order.get(fold(t), 10**6))


def _exact_names(index: CharacterIndex, characters: list[tuple[str, list[str]]]) -> None:
    """Fill `index.characters` and `index.ambiguous`: titles first (a title beats another's key), then keys."""
    owners: dict[str, list[str]] = {}
    for title, _keys in characters:
        owners.setdefault(fold(title), [])
        if title not in owners[fold(title)]:
            owners[fold(title)].append(title)
        index.spellings.setdefault(fold(title), title)
    titled = set(owners)
    for title, keys in characters:
        for name in _plain_keys(keys):
            if fold(name) in titled:
                continue
            owners.setdefault(fold(name), [])
            if title not in owners[fold(name)]:
                owners[fold(name)].append(title)
            index.spellings.setdefault(fold(name), name.strip())
    for key, titles in owners.items():
        if len(titles) == 1:
            index.characters[key] = titles[0]
        else:
            index.ambiguous[key] = tuple(titles)


def _title_parts(index: CharacterIndex) -> None:
    """Fill `index.parts`: the parts of every character's title (the player's name too) that are no name already."""
    holders = list(index.titles) + ([index.player] if index.player and index.player not in index.titles else [])
    for title in holders:
        for part in title_parts(title):
            key = fold(part)
            if key in index.characters or key in index.ambiguous or key in index.groups:
                continue  # a part never shadows a name: a character's key, another entry's title or key
            if title not in index.parts.get(key, ()):
                index.parts[key] = index.parts.get(key, ()) + (title,)
            index.spellings.setdefault(key, part)


def character_index(universe, *, save=None, universe_meta=None) -> CharacterIndex:
    """Return the `CharacterIndex` of `universe` (two queries: entries, links)."""
    from studio.world.models import LoreEntry

    index = CharacterIndex()
    entries = list(LoreEntry.objects.filter(universe=universe).values_list("pk", "entry_id", "title", "kind", "keys"))
    by_pk = {pk: (entry_id, title, kind, keys) for pk, entry_id, title, kind, keys in entries}
    index.entry_titles = {entry_id: title for entry_id, title, _kind, _keys in by_pk.values()}
    characters = []
    for entry_id, title, kind, keys in by_pk.values():
        if kind != "character":
            continue
        index.titles.append(title)
        index.character_entries[entry_id] = title
        characters.append((title, keys))
    _exact_names(index, characters)
    meta = play_meta(universe=universe, save=save, universe_meta=universe_meta)
    index.player_on_scene = meta_values(meta).get("player_on_scene", DEFAULT_POLICY.player_on_scene)
    player = macro_names_from_meta(meta).user
    if player:
        # The player's own name resolves exactly (never by a part of another's title); shared, it is the player's.
        index.player = index.characters.get(fold(player), " ".join(player.split()))
        index.ambiguous.pop(fold(player), None)
        index.characters[fold(player)] = index.player
        index.spellings.setdefault(fold(player), index.player)
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
    _title_parts(index)
    return index
