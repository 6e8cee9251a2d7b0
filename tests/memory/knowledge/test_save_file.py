"""Presence and reveals travel in the save file (optional sections) and come back exactly."""

from __future__ import annotations

import json

import pytest

from studio.memory.facts import Fact, insert_facts
from studio.memory.knowledge.reveals import reveal_add
from studio.memory.knowledge.selectors import knowledge_at
from studio.saves import portable
from studio.saves.services import turn_append

pytestmark = pytest.mark.django_db


def cells(save):
    table = knowledge_at(save, turn=save.current_turn, characters=["Mira", "Kael", "Ivo"])
    return (
        [(f["fact"].statement, [(c.known, c.why) for c in f["cells"]]) for f in table.facts],
        [(s["entry_id"], [(c.known, c.why) for c in s["cells"]]) for s in table.secrets],
    )


def test_round_trip_keeps_who_knows_what(living, no_runner, fake_vectors):
    turn_append(
        game_save=living, player_input="a", narrative="a", state={"present": ["Mira", "Kael"], "location": "dock"}
    )
    (fact,) = insert_facts(living.save_id, 1, [Fact("Kael owes Ivo.")])
    turn_append(game_save=living, player_input="b", narrative="b", state={"present": ["Ivo"]})
    reveal_add(game_save=living, turn_id=2, character="Ivo", fact_id=fact, told_by="Kael")
    reveal_add(game_save=living, turn_id=2, character="Mira", entry_id="ledger")
    data = portable.save_export(game_save=living).read()
    document = json.loads(data)
    assert [i["characters"] for i in document["sections"]["presence"]["items"]] == [["Mira", "Kael"], ["Ivo"]]
    assert document["sections"]["reveals"]["items"][0] == {
        "turn_id": 2,
        "fact": 1,
        "entry_id": "",
        "character": "Ivo",
        "told_by": "Kael",
        "source": "playtester",
    }
    imported = portable.save_import(universe=living.universe, data=data).game_save
    assert cells(imported) == cells(living)
    again = json.loads(portable.save_export(game_save=imported).read())["sections"]
    assert again["presence"] == document["sections"]["presence"]
    assert again["reveals"] == document["sections"]["reveals"]


def test_a_reveal_of_a_later_fact_is_refused(living, no_runner, fake_vectors):
    turn_append(game_save=living, player_input="a", narrative="a", state={"present": ["Mira"]})
    turn_append(game_save=living, player_input="b", narrative="b", state={})
    insert_facts(living.save_id, 2, [Fact("Late fact.")])
    document = json.loads(portable.save_export(game_save=living).read())
    document["sections"]["reveals"]["items"] = [
        {"turn_id": 1, "fact": 1, "entry_id": "", "character": "Mira", "told_by": "", "source": "api"}
    ]
    with pytest.raises(portable.SaveFileError, match="later turn"):
        portable.save_import(universe=living.universe, data=json.dumps(document).encode())


def test_two_presence_records_of_one_turn_are_refused(living, no_runner, fake_vectors):
    turn_append(game_save=living, player_input="a", narrative="a", state={"present": ["Mira"]})
    document = json.loads(portable.save_export(game_save=living).read())
    items = document["sections"]["presence"]["items"]
    items.append(dict(items[0], characters=["Kael", " "]))
    items.append(dict(items[0]))
    with pytest.raises(portable.SaveFileError) as caught:
        portable.save_import(universe=living.universe, data=json.dumps(document).encode())
    errors = caught.value.errors
    assert any(e.startswith("sections.presence.items[1].characters[1]:") for e in errors)
    assert any(e.startswith("sections.presence.items[2].turn_id: turn 1 has two presence records") for e in errors)
