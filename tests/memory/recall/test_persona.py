"""The player's persona in meta: a name for {{user}} and facts, a description for the narrator alone."""

from __future__ import annotations

import pytest

from studio.memory.recall.macros import macro_names_from_meta, persona_from_meta, split_player_character

LEGACY = "Ilya Voss, a young lighthouse-keeper's apprentice who can hear glass sing"


@pytest.mark.parametrize(
    "value, name, description",
    [
        (LEGACY, "Ilya Voss", "a young lighthouse-keeper's apprentice who can hear glass sing"),
        ("Mara — a smuggler with a debt", "Mara", "a smuggler with a debt"),
        ("Jean de Vries: the harbour's last pilot", "Jean de Vries", "the harbour's last pilot"),
        ("Ilya Voss (the apprentice)", "Ilya Voss", "the apprentice"),
        (
            "Kael Dunmore who was a sailor once and is a thief now",
            "Kael Dunmore",
            "who was a sailor once and is a thief now",
        ),
        # A name alone, or a value that does not start with a name, stays whole.
        ("Wren Halloway", "Wren Halloway", ""),
        ("Kaël", "Kaël", ""),
        ("the stranger, who has no name", "the stranger, who has no name", ""),
        ("Captain of the Gull", "Captain of the Gull", ""),
        ("", "", ""),
    ],
)
def test_an_old_one_value_player_character_is_split_only_when_it_reads_as_name_and_description(
    value, name, description
):
    assert split_player_character(value) == (name, description)


def test_user_is_the_name_and_the_description_stays_out_of_it():
    persona = persona_from_meta({"player_character": LEGACY})
    assert (persona.name, persona.split_from) == ("Ilya Voss", LEGACY)
    assert macro_names_from_meta({"player_character": LEGACY}).user == "Ilya Voss"


def test_a_settled_persona_is_never_split_again():
    # The author kept a long value whole: an empty description says the name is settled.
    meta = {"player_character": LEGACY, "player_description": ""}
    persona = persona_from_meta(meta)
    assert (persona.name, persona.description, persona.split_from) == (LEGACY, "", "")
    meta = {"player_character": "Ilya", "player_description": "An apprentice who hears glass sing."}
    persona = persona_from_meta(meta)
    assert (persona.name, persona.description, persona.split_from) == ("Ilya", meta["player_description"], "")


def test_a_portrait_reference_is_read_and_a_broken_one_ignored():
    assert persona_from_meta({"player_portrait": '{"sha256": "ab", "bytes": 3}'}).portrait == {
        "sha256": "ab",
        "bytes": 3,
    }
    assert persona_from_meta({"player_portrait": "not json"}).portrait == {}
