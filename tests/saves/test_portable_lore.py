"""The save file's lore_activation section: the activation state travels with the save."""

from __future__ import annotations

import json

import pytest

from studio.memory.models import LoreActivation
from studio.saves import portable
from studio.world.models import Save
from studio.saves.services import turn_append
from studio.universes import services

pytestmark = pytest.mark.django_db


@pytest.fixture
def lore_save(universe, author, fake_vectors):
    services.lore_entry_create(
        universe=universe,
        user=author,
        title="Bell",
        text="The bell tolls.",
        keys=["bell"],
        activation={"sticky": 3, "cooldown": 4, "scan_depth": 1},
    )
    services.lore_entry_create(
        universe=universe,
        user=author,
        title="Coin",
        text="A coin spins.",
        keys=["coin"],
        activation={"probability": 50, "scan_depth": 1},
    )
    save = Save.objects.create(universe=universe, name="Played")
    for text in ["ring the bell", "flip a coin", "wait", "coin bell"]:
        turn_append(game_save=save, player_input=text, narrative="The tide turns.")
    return save


def rows(save):
    return list(
        LoreActivation.objects.filter(game_save=save)
        .order_by("turn_id")
        .values_list("turn_id", "state", "activated", "sequence")
    )


def test_the_state_round_trips_and_the_file_names_no_save(lore_save):
    data = portable.save_export(game_save=lore_save).read()
    document = json.loads(data)
    section = document["sections"]["lore_activation"]
    assert section["optional"] is True and [i["turn_id"] for i in section["items"]] == [1, 2, 3, 4]
    assert lore_save.save_id not in data.decode()
    imported = portable.save_import(universe=lore_save.universe, data=data).game_save
    assert rows(imported) == rows(lore_save)
    assert portable.save_export(game_save=imported).read() == data


def test_a_file_without_the_section_recomputes_the_state_from_its_turns(lore_save):
    document = json.loads(portable.save_export(game_save=lore_save).read())
    del document["sections"]["lore_activation"]
    imported = portable.save_import(universe=lore_save.universe, data=json.dumps(document).encode()).game_save
    # Same turns, same book: the same activations (the rolls are the imported save's own).
    assert [r[0] for r in rows(imported)] == [1, 2, 3, 4]
    assert [r[2] for r in rows(imported)][:1] == [r[2] for r in rows(lore_save)][:1]


def test_a_bad_state_is_refused_with_its_location(lore_save):
    document = json.loads(portable.save_export(game_save=lore_save).read())
    document["sections"]["lore_activation"]["items"][1]["state"] = {"sticky": {"bell": "soon"}}
    document["sections"]["lore_activation"]["items"][2]["turn_id"] = 99
    with pytest.raises(portable.SaveFileError) as caught:
        portable.save_import(universe=lore_save.universe, data=json.dumps(document).encode())
    errors = caught.value.errors
    assert any(e.startswith("sections.lore_activation.items[1].state: is not a lore activation state") for e in errors)
    assert any(e.startswith("sections.lore_activation.items[2].turn_id: turn 99 does not exist") for e in errors)


def test_two_records_of_one_turn_and_a_blank_entry_id_are_refused(lore_save):
    document = json.loads(portable.save_export(game_save=lore_save).read())
    items = document["sections"]["lore_activation"]["items"]
    items[2]["turn_id"] = 2
    items[3]["activated"] = ["bell", ""]
    with pytest.raises(portable.SaveFileError) as caught:
        portable.save_import(universe=lore_save.universe, data=json.dumps(document).encode())
    errors = caught.value.errors
    assert any(
        e.startswith("sections.lore_activation.items[2].turn_id: turn 2 has two activation records") for e in errors
    )
    assert any(e.startswith("sections.lore_activation.items[3].activated[1]:") for e in errors)
