"""axiom.missions: Universe_Meta keys, tolerant reading, text round trip."""

from __future__ import annotations

import json

import pytest

from studio.memory import missions as M
from studio.world.models import Save, Universe, UniverseMeta


@pytest.fixture
def world(db):
    return Universe.objects.create(name="W", slug="w")


def test_universe_mission_reads_meta_by_universe_pk_or_save(world):
    assert M.get_universe_mission(world) == ""
    UniverseMeta.objects.create(universe=world, key="belief_mission", value="  Remember debts.  ")
    assert M.get_universe_mission(world) == "Remember debts."
    assert M.get_universe_mission(world.pk) == "Remember debts."
    save = Save.objects.create(universe=world, name="s", save_id="s1", meta={"belief_mission": "Copied."})
    assert M.get_universe_mission(save) == "Copied."  # the save's copied meta, not the live universe
    assert M.get_universe_mission(Save.objects.create(universe=world, name="t", save_id="t1")) == ""
    assert M.get_universe_mission(None) == ""


def test_belief_missions_from_db_and_save(world):
    assert M.get_belief_missions(world) == {}
    UniverseMeta.objects.create(
        universe=world,
        key="belief_missions",
        value=json.dumps({"Kael": "Remembers betrayals.", "Mira": " ", "": "x", "N": 3}),
    )
    assert M.get_belief_missions(world) == {"Kael": "Remembers betrayals."}
    save = Save.objects.create(
        universe=world, name="s", save_id="s1", meta={"belief_missions": {"Mira": "Remembers trades."}}
    )
    assert M.get_belief_missions(save) == {"Mira": "Remembers trades."}
    save.meta = {"belief_missions": json.dumps({"Mira": "Counts coins."})}
    assert M.get_belief_missions(save) == {"Mira": "Counts coins."}


@pytest.mark.parametrize("raw", ["", "   ", "not json", "[1, 2]", "null", "42", '"text"', None, 7])
def test_malformed_missions_read_as_empty(raw):
    assert M.get_belief_missions_from_value(raw) == {}


def test_missions_value_strips_and_drops_non_strings():
    raw = json.dumps({" Kael ": " Debts. ", "Mira": None, "Ivo": ["x"], "Ana": "Favours: big and small."})
    assert M.get_belief_missions_from_value(raw) == {"Kael": "Debts.", "Ana": "Favours: big and small."}


def test_parse_missions_text_rules():
    text = "Kael: Remembers betrayals.\nno colon here\n: no name\nMira:   \n  Ana : Favours: all of them  \n\nKael: Later wins."
    assert M.parse_missions_text(text) == {"Kael": "Later wins.", "Ana": "Favours: all of them"}
    assert M.parse_missions_text("") == {} and M.parse_missions_text(None) == {}


def test_missions_text_round_trip():
    missions = {"Kael": "Remembers betrayals: every one.", "Mira": "Remembers trades."}
    text = M.missions_to_text(missions)
    assert text == "Kael: Remembers betrayals: every one.\nMira: Remembers trades."
    assert M.parse_missions_text(text) == missions
    assert M.missions_to_text({}) == ""
    # Unreadable entries are normalised or left out rather than corrupting the block.
    assert M.missions_to_text({"A:B": "x", "C": "two\nlines", "": "y", "D": " "}) == "C: two lines"
