"""Model constraints that the engine relies on."""

import pytest
from django.db import IntegrityError, transaction

from studio.memory.models import Fact, MentalModel, Observation, entity_index_for
from studio.world.models import Event, LoreEntry, Save, StateCache, Universe, UniverseMeta


def test_meta_key_unique_per_universe(universe):
    other = Universe.objects.create(name="Other", slug="other")
    UniverseMeta.objects.create(universe=other, key="belief_mission", value="x")  # other universe: fine
    with pytest.raises(IntegrityError), transaction.atomic():
        UniverseMeta.objects.create(universe=universe, key="belief_mission", value="again")


def test_lore_entry_id_unique_per_universe(universe):
    other = Universe.objects.create(name="Other", slug="other")
    LoreEntry.objects.create(universe=other, entry_id="kael", title="Kael elsewhere")
    with pytest.raises(IntegrityError), transaction.atomic():
        LoreEntry.objects.create(universe=universe, entry_id="kael", title="Duplicate")


def test_lore_links_and_backlinks(universe):
    kael = universe.lore_entries.get(entry_id="kael")
    port = universe.lore_entries.get(entry_id="port-vey")
    assert list(kael.links.all()) == [port]
    assert list(port.backlinks.all()) == [kael]
    assert list(port.links.all()) == []


def test_one_event_and_one_state_per_turn(game_save):
    with pytest.raises(IntegrityError), transaction.atomic():
        Event.objects.create(game_save=game_save, turn_id=2, narrative="dup")
    StateCache.objects.create(game_save=game_save, turn_id=1, state={"hp": 3})
    with pytest.raises(IntegrityError), transaction.atomic():
        StateCache.objects.create(game_save=game_save, turn_id=1, state={})


def test_save_ids_are_unique_and_generated(universe):
    a = Save.objects.create(universe=universe, name="A")
    b = Save.objects.create(universe=universe, name="B")
    assert a.save_id and b.save_id and a.save_id != b.save_id
    with pytest.raises(IntegrityError), transaction.atomic():
        Save.objects.create(universe=universe, name="C", save_id=a.save_id)


def test_one_mental_model_per_subject_case_insensitive(game_save):
    MentalModel.objects.create(game_save=game_save, subject="Kaël", summary="A smuggler.")
    with pytest.raises(IntegrityError), transaction.atomic():
        MentalModel.objects.create(game_save=game_save, subject="KAËL", summary="Again.")


def test_fact_entity_index_matches_case_insensitively(game_save):
    f = Fact.objects.create(game_save=game_save, turn_id=1, statement="Kaël met Mira.", entities=["Kaël", "Mira"])
    assert f.entity_index == entity_index_for(["kaël", "MIRA"])
    sep = "\x1f"
    assert Fact.objects.filter(entity_index__contains=f"{sep}kaël{sep}").count() == 1
    # Exact, not substring: "Mir" must not match "Mira".
    assert Fact.objects.filter(entity_index__contains=f"{sep}mir{sep}").count() == 0


def test_observation_derives_proof_count_and_subject_key(game_save):
    obs = Observation.objects.create(
        game_save=game_save,
        statement="Kaël owes Mira.",
        subject="Kaël",
        sources=[{"fact_id": 1, "turn_id": 2}, {"fact_id": 2, "turn_id": 5}],
        proof_count=99,
    )
    obs.refresh_from_db()
    assert obs.proof_count == 2
    assert obs.subject_key == "kaël"
    assert obs.last_source_turn == 5


def test_deleting_a_save_removes_its_memory(game_save):
    Fact.objects.create(game_save=game_save, turn_id=1, statement="x")
    Observation.objects.create(game_save=game_save, statement="y")
    game_save.delete()
    assert Fact.objects.count() == 0 and Observation.objects.count() == 0 and Event.objects.count() == 0
