"""axiom.facts on the Django models: insert, read filters, count, rollback."""

from __future__ import annotations

import pytest

from studio.memory import facts as F
from studio.memory.facts import Fact
from studio.memory.models import Fact as FactRow
from studio.world.models import Save

pytestmark = pytest.mark.django_db


def test_fact_dataclass_defaults_are_independent():
    a, b = Fact("x"), Fact("y")
    a.entities.append("Kael")
    assert b.entities == []
    assert (a.fact_type, a.turn_id, a.fact_id, a.who) == ("world", None, None, "")


def test_insert_skips_blank_and_sets_ids_in_place(game_save):
    facts = [Fact("Kael owes Mira ten crowns.", entities=["Kael", "Mira"]), Fact("   "), Fact("")]
    ids = F.insert_facts("testsave01", 2, facts)
    assert len(ids) == 1
    assert facts[0].fact_id == ids[0] and facts[0].turn_id == 2
    assert facts[1].fact_id is None and facts[2].fact_id is None
    assert facts[1].turn_id is None
    row = FactRow.objects.get(pk=ids[0])
    assert row.game_save_id == game_save.pk and row.turn_id == 2
    assert row.entity_index == "\x1fkael\x1fmira\x1f"


def test_insert_empty_list_writes_nothing(game_save):
    assert F.insert_facts("testsave01", 1, []) == []
    assert F.count_facts("testsave01") == 0


def test_insert_unknown_save_raises(db):
    with pytest.raises(Save.DoesNotExist):
        F.insert_facts("nope", 1, [Fact("x")])


def test_get_facts_order_and_filters(game_save):
    F.insert_facts("testsave01", 1, [Fact("a1", entities=["Kaël"]), Fact("a2")])
    F.insert_facts("testsave01", 3, [Fact("c1", entities=["Mira", "kaël"])])
    F.insert_facts("testsave01", 2, [Fact("b1", entities=["Kaëlin"])])
    assert [f.statement for f in F.get_facts("testsave01")] == ["c1", "b1", "a2", "a1"]
    assert [f.statement for f in F.get_facts("testsave01", max_turn_id=2)] == ["b1", "a2", "a1"]
    assert [f.statement for f in F.get_facts("testsave01", max_turn_id=0)] == []
    # Case-insensitive exact match: "Kaëlin" is not "Kaël".
    assert [f.statement for f in F.get_facts("testsave01", entity="KAËL")] == ["c1", "a1"]
    assert [f.statement for f in F.get_facts("testsave01", entity="mira")] == ["c1"]
    assert F.get_facts("testsave01", entity="Kae") == []
    assert F.get_facts("testsave01", entity="") == []
    assert [f.statement for f in F.get_facts("testsave01", limit=2)] == ["c1", "b1"]
    assert F.get_facts("testsave01", limit=0) == []
    got = F.get_facts("testsave01", entity="kaël", limit=1)[0]
    assert got.entities == ["Mira", "kaël"] and got.turn_id == 3 and got.fact_id is not None


def test_get_facts_accepts_save_instance_and_isolates_saves(game_save, universe):
    other = Save.objects.create(universe=universe, name="Other", save_id="other")
    F.insert_facts("other", 1, [Fact("elsewhere")])
    F.insert_facts(game_save, 1, [Fact("here")])
    assert [f.statement for f in F.get_facts(game_save)] == ["here"]
    assert [f.statement for f in F.get_facts("other")] == ["elsewhere"]
    assert F.count_facts(other) == 1


def test_structured_fields_round_trip(game_save):
    f = Fact(
        "Mira sold the map.",
        fact_type="event",
        who="Mira",
        what="sold the map",
        when="dusk",
        where="Port Vey",
        why="debt",
        entities=["Mira"],
    )
    F.insert_facts("testsave01", 3, [f])
    got = F.get_facts("testsave01")[0]
    assert got == Fact(
        "Mira sold the map.", "event", "Mira", "sold the map", "dusk", "Port Vey", "debt", ["Mira"], 3, f.fact_id
    )


def test_rollback_facts_deletes_later_turns_only(game_save):
    for turn in (1, 2, 3):
        F.insert_facts("testsave01", turn, [Fact(f"t{turn}a"), Fact(f"t{turn}b")])
    assert F.count_facts("testsave01") == 6
    assert F.rollback_facts("testsave01", 1) == 4
    assert [f.turn_id for f in F.get_facts("testsave01")] == [1, 1]
    assert F.rollback_facts("testsave01", 5) == 0
    assert F.rollback_facts("testsave01", 0) == 2
    assert F.count_facts("testsave01") == 0
