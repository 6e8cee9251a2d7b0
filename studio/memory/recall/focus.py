"""Who the memory context is about: the characters in focus, and the ones neither in focus nor named.

Characters in focus are the focus terms given (on-scene names), then every character the
query names: a known subject (of a belief or a mental model) or a Character entry of the
Lore Book (its title or a key), each as a whole word. Without focus terms the narrator's
own focus is the player character (`default_focus`), so the Context viewer and the API show
what the narrator reads for the same input.

Every name is resolved by the one rule of names (`studio.memory.knowledge.names`,
`CharacterIndex.match`): a Character entry's title, one of its keys (aliases), or a part of
its title no other character holds ("Tamsin" for "Tamsin Reed"). A character is in focus
once, under its Lore Book title, however many of its names were given (`FocusSubject`), and
its memory is found under every name that resolves to it: its mental models and beliefs by
subject key (`studio.memory.models.subject_key_for`), its facts by entity (`FocusSubject.keys`,
`names`). A name two characters answer to brings in neither: the context's notes say which
it could be, and the term stays in focus as given. A name no character answers to (a place,
someone the book does not describe) is in focus as the living memory writes it, else as given.
The explain record says, per subject, which term named it and which entry it resolved to, how
(`FocusSubject.as_dict`, `MemoryContext.focus`; the items' reasons say it too).

A Character entry whose character is neither in focus nor named is *absent*
(`characters_absent`): its description is not brought in by meaning alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from studio.memory.knowledge.names import CharacterIndex, NameMatch
from studio.memory.models import MentalModel, Observation, subject_key_for
from studio.memory.recall.macros import macro_names_from_meta, play_meta

__all__ = ["Focus", "FocusSubject", "characters_absent", "default_focus", "focus_subjects"]


def _word_in(term: str, text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text, flags=re.IGNORECASE) is not None


@dataclass(frozen=True)
class FocusSubject:
    """One subject in focus: a character of the book (by its title) or a name as given."""

    key: str  # the subject key its memory is keyed by: the title's, else the name's
    name: str  # as shown: the Lore Book title, else the name as the living memory writes it, else as given
    why: str  # "focus term “Tamsin” → Tamsin Reed (entry tamsin-reed: a part of its title)", "named in the query"
    keys: tuple[str, ...]  # every subject key that is this subject (`key` first): its title's, its keys', its parts'
    names: tuple[str, ...]  # the same names as written: the entities its facts are found by
    term: str = ""  # the focus term or the query's word that named it
    entry_id: str = ""  # the Character entry it resolved to ("" for a name no entry describes)
    by: str = ""  # how the term resolved to it (`names.BY_*`), "" when it did not

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "key": self.key,
            "why": self.why,
            "term": self.term,
            "entry_id": self.entry_id,
            "by": self.by,
            "keys": list(self.keys),
        }


@dataclass
class Focus:
    """The subjects in focus, in order, and what the context's notes must say about the names given."""

    subjects: list[FocusSubject] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [subject.name for subject in self.subjects]


def focus_subjects(
    game_save, query_text: str, focus_terms: list[str], *, index: CharacterIndex, living: bool = True
) -> Focus:
    """Return the subjects in focus: the focus terms, then the characters the query names (the module's rule).

    `index`: the universe's `CharacterIndex` (`studio.memory.knowledge.names.character_index`). `living`: read
    the living memory's subjects (one query each for mental models and beliefs, whatever the number of names):
    a subject it names in the query joins the focus, and a name no character answers to is shown as it writes it.
    """
    focus = Focus()
    chosen: dict[str, FocusSubject] = {}
    living_names = _LivingNames(game_save) if living else None

    def add(name: str, why: str) -> None:
        found = index.match(name)
        if found.ambiguous:
            focus.notes.append(_ambiguous_note(found, why))
        subject = _character(index, found, why) if found.title else _plain(found.name, why, living_names)
        if subject.key and subject.key not in chosen:
            chosen[subject.key] = subject

    for term in focus_terms:
        if term.strip():
            add(term.strip(), f"focus term “{term.strip()}”")
    if query_text.strip():
        if living_names is not None:
            for key, name in sorted(living_names.all().items()):
                if _word_in(key, query_text):
                    add(name, "named in the query")
        for title in index.mentioned_in(query_text):
            add(title, "named in the query")
    focus.subjects = list(chosen.values())
    return focus


def _character(index: CharacterIndex, found: NameMatch, why: str) -> FocusSubject:
    """The subject of the character `found` resolved to, its why saying which entry and how when the name differs."""
    if subject_key_for(found.name) != subject_key_for(found.title):
        entry = f"entry {found.entry_id}: " if found.entry_id else ""
        why = f"{why} → {found.title} ({entry}{found.by})"
    names = index.names_of(found.title)
    keys = tuple(dict.fromkeys(subject_key_for(name) for name in names))
    return FocusSubject(
        key=keys[0],
        name=found.title,
        why=why,
        keys=keys,
        names=tuple(names),
        term=found.name,
        entry_id=found.entry_id,
        by=found.by,
    )


def _plain(name: str, why: str, living_names: _LivingNames | None) -> FocusSubject:
    """The subject of a name no character answers to, shown as the living memory writes it."""
    key = subject_key_for(name)
    shown = (living_names.get(key) if living_names is not None else "") or name
    return FocusSubject(key=key, name=shown, why=why, keys=(key,), names=(name,), term=name)


def _ambiguous_note(found: NameMatch, why: str) -> str:
    """The context's note for a name two characters answer to: which they are, and that neither was chosen."""
    candidates = ", ".join(found.candidates[:-1]) + " or " + found.candidates[-1]
    named = why[:1].upper() + why[1:] if why.startswith("focus term") else f"“{found.name}”, {why},"
    return (
        f"{named} could be {candidates}: none of them is brought into focus by it (their mental models, "
        "beliefs and facts stay out); give a full name or a key."
    )


class _LivingNames:
    """The living memory's subjects by key, read once when first asked (mental models' names first)."""

    def __init__(self, game_save):
        self.game_save = game_save
        self._names: dict[str, str] | None = None

    def all(self) -> dict[str, str]:
        if self._names is None:
            beliefs = _subject_names(Observation, self.game_save)
            self._names = {**beliefs, **_subject_names(MentalModel, self.game_save)}
        return self._names

    def get(self, key: str) -> str:
        return self.all().get(key, "")


def _subject_names(model, game_save) -> dict[str, str]:
    """Return {subject key: name} of the save's mental models or live beliefs (one query; newest row's name)."""
    names: dict[str, str] = {}
    for key, name in (
        model.objects.filter(game_save=game_save).exclude(subject_key="").values_list("subject_key", "subject")
    ):
        names.setdefault(key, name)  # the model's ordering: most recently updated first
    return names


def characters_absent(index: CharacterIndex, focus: Focus) -> dict[str, str]:
    """Return {entry id: title} of Character entries neither in focus (on scene) nor named in the query."""
    present = {subject.entry_id for subject in focus.subjects if subject.entry_id}
    titles = {subject_key_for(subject.name) for subject in focus.subjects}
    return {
        entry_id: title
        for entry_id, title in index.character_entries.items()
        if entry_id not in present and subject_key_for(title) not in titles
    }


def default_focus(game_save, *, universe_meta: dict[str, str] | None = None) -> list[str]:
    """Return the narrator's characters in focus when none are given: the player character.

    `universe_meta`: the universe's meta rows when the caller has read them already.
    """
    player = macro_names_from_meta(
        play_meta(universe=game_save.universe, save=game_save, universe_meta=universe_meta)
    ).user
    return [player] if player else []
