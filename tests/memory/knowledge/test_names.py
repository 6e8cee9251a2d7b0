"""The one rule of names (`CharacterIndex.match`): titles, keys, unique parts of titles, and no guessing."""

from __future__ import annotations

import pytest

from studio.memory.knowledge.models import Presence
from studio.memory.knowledge.names import BY_KEY, BY_PART, BY_TITLE, character_index, title_parts
from studio.world.models import Save
from studio.saves.services import turn_append

pytestmark = pytest.mark.django_db


def test_a_unique_part_of_a_title_is_its_character_and_says_which_entry(reeds):
    index = character_index(reeds)
    tamsin = index.match("  tamsin ")
    assert (tamsin.title, tamsin.entry_id, tamsin.by, tamsin.name) == ("Tamsin Reed", "tamsin-reed", BY_PART, "tamsin")
    assert index.match("Tam").by == BY_KEY and index.match("TAMSIN REED").by == BY_TITLE
    assert index.match("Hesper").title == "Hesper Vale" and index.match("Ferryman").title == "The Ferryman"
    assert index.resolve("Jory") == "Jory Reed" and index.is_known("jory")


def test_a_name_two_characters_answer_to_resolves_to_neither(reeds):
    index = character_index(reeds)
    reed = index.match("Reed")
    assert (
        reed.ambiguous and reed.title == "" and reed.candidates == ("Jory Reed", "Tamsin Reed")
    )  # book order (by title)
    boy = index.match("the boy")  # a key two characters share
    assert boy.ambiguous and boy.candidates == ("Aldous Birch", "Pim")
    assert index.resolve("Reed") == "Reed" and not index.is_known("Reed")  # kept as given, never guessed
    assert index.members("Reed") == ({"reed"}, "")


def test_a_part_never_shadows_a_name_nor_is_an_article(reeds):
    index = character_index(reeds)
    assert index.match("Vale").title == ""  # a place is called Vale: not Hesper Vale by her surname
    assert index.match("Crane").title == "Crane"  # a title beats another's key of the same spelling
    assert index.match("the").title == "" and "The" not in title_parts("The Ferryman")
    assert title_parts("Tamsin Reed") == ["Tamsin", "Reed"] and title_parts("Pim") == []
    assert title_parts("Keeper of the Gate") == ["Keeper", "Gate"]


def test_the_player_answers_to_their_own_name_and_its_parts(reeds):
    index = character_index(reeds)
    assert index.player == "Ash Vey" and index.match("Ash Vey").title == "Ash Vey"
    assert index.match("Ash").title == "Ash Vey"  # no entry describes the player: their name's parts are theirs


def test_names_of_a_character_are_every_name_that_resolves_to_it(reeds):
    index = character_index(reeds)
    assert index.names_of("Tamsin Reed") == ["Tamsin Reed", "Tam", "Tamsin"]
    assert index.names_of("Aldous Birch") == ["Aldous Birch", "Aldous", "Birch"]  # not "Crane", not "the boy"
    assert all(index.match(name).title == "Tamsin Reed" for name in index.names_of("Tamsin Reed"))


def test_free_text_names_characters_by_title_and_key_only(reeds):
    index = character_index(reeds)
    assert index.mentioned_in("Reed and Tamsin wait by the crane") == ["Crane"]  # prose parts are common words
    assert index.mentioned_in("Tam waits; the boy runs") == ["Tamsin Reed"]  # a shared key names no one


def test_an_on_scene_name_resolves_by_the_same_rule(reeds):
    save = Save.objects.create(universe=reeds, name="Run", save_id="reedsrun", memory_mode="living")
    turn_append(game_save=save, player_input="I wait", narrative="...", state={"present": ["Tamsin", "Reed", "hesper"]})
    assert Presence.objects.get(game_save=save, turn_id=1).characters == ["Tamsin Reed", "Reed", "Hesper Vale"]


def test_a_point_of_view_on_a_shared_name_is_refused_saying_who_it_could_be(reeds):
    from studio.memory.knowledge.pov import resolve_pov
    from studio.memory.recall.query_params import InvalidParameters

    index = character_index(reeds)
    assert resolve_pov(index, ["Tamsin", "the captain"], known=index.all_characters()) == ("Tamsin Reed", "Mira")
    with pytest.raises(InvalidParameters, match="“Reed” could be Jory Reed or Tamsin Reed"):
        resolve_pov(index, ["Reed"], known=index.all_characters())
