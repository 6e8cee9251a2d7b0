"""Who the memory context is about: the characters in focus, and the ones neither in focus nor named.

Characters in focus are the focus terms given (on-scene names), then every character the
query names: a known subject (of a belief or a mental model) or a Character entry of the
Lore Book (its title or a key), each as a whole word. Without focus terms the narrator's
own focus is the player character (`default_focus`), so the Context viewer and the API show
what the narrator reads for the same input. A Character entry whose character is neither in
focus nor named is *absent* (`characters_absent`): its description is not brought in by
meaning alone.
"""
from __future__ import annotations

import re

from studio.memory.models import MentalModel, Observation, subject_key_for
from studio.memory.recall.macros import macro_names_from_meta, play_meta

__all__ = ["characters_absent", "default_focus", "focus_subjects"]


def _word_in(term: str, text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text, flags=re.IGNORECASE) is not None


def _character_names(entry_title: str, keys) -> list[str]:
    return [n.strip() for n in [entry_title, *(k for k in keys or [] if isinstance(k, str))]
            if n.strip() and "{{" not in n and not n.startswith("/")]


def _characters_named(game_save, query_text: str) -> dict[str, str]:
    """Return {subject key: name} of the Lore Book's Character entries the query names (title or key)."""
    named: dict[str, str] = {}
    for title, keys in game_save.universe.lore_entries.filter(kind="character").values_list("title", "keys"):
        if any(_word_in(n, query_text) for n in _character_names(title, keys)):
            named.setdefault(subject_key_for(title), title)
    return named


def characters_absent(game_save, query_text: str, focus: list[str]) -> dict[str, str]:
    """Return {entry id: title} of Character entries neither in focus (on scene) nor named in the query."""
    focus_keys = {subject_key_for(f) for f in focus if f}
    absent = {}
    for entry_id, title, keys in game_save.universe.lore_entries.filter(kind="character").values_list("entry_id", "title", "keys"):
        names = _character_names(title, keys)
        if not any(subject_key_for(n) in focus_keys or _word_in(n, query_text) for n in names):
            absent[entry_id] = title
    return absent


def focus_subjects(game_save, query_text: str, focus_terms: list[str]) -> list[tuple[str, str, str]]:
    """Return (subject_key, why, name) for the subjects in focus: focus terms, then characters the query names."""
    chosen: dict[str, tuple[str, str]] = {}
    for term in focus_terms:
        key = subject_key_for(term)
        if key:
            chosen.setdefault(key, (f"focus term “{term.strip()}”", term.strip()))
    if query_text.strip():
        model_names, belief_names = _subject_names(MentalModel, game_save), _subject_names(Observation, game_save)
        for key in sorted(model_names.keys() | belief_names.keys()):
            if key not in chosen and _word_in(key, query_text):
                # The name as the living memory writes it (keys are lower-cased): a mental model's first.
                chosen[key] = ("named in the query", model_names.get(key) or belief_names.get(key) or key)
        for key, title in _characters_named(game_save, query_text).items():
            if key and key not in chosen:
                chosen[key] = ("named in the query", title)
    return [(key, why, name) for key, (why, name) in chosen.items()]


def _subject_names(model, game_save) -> dict[str, str]:
    """Return {subject key: name} of the save's mental models or live beliefs (one query; newest row's name)."""
    names: dict[str, str] = {}
    for key, name in model.objects.filter(game_save=game_save).exclude(subject_key="").values_list("subject_key", "subject"):
        names.setdefault(key, name)  # the model's ordering: most recently updated first
    return names


def default_focus(game_save, *, universe_meta: dict[str, str] | None = None) -> list[str]:
    """Return the narrator's characters in focus when none are given: the player character.

    `universe_meta`: the universe's meta rows when the caller has read them already.
    """
    player = macro_names_from_meta(play_meta(universe=game_save.universe, save=game_save, universe_meta=universe_meta)).user
    return [player] if player else []
