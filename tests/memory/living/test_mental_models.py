"""axiom.mental_models: upsert, reads, stale subjects, rollback with versions."""

from __future__ import annotations

import pytest

from studio.memory import mental_models as MM
from studio.memory.mental_models import MentalModel
from studio.memory.models import MentalModel as MentalModelRow
from studio.world.models import Save, Universe


@pytest.fixture
def save(db):
    world = Universe.objects.create(name="W", slug="w")
    return Save.objects.create(universe=world, name="S", save_id="s1")


def test_dataclass_defaults():
    a, b = MentalModel("Kael", "x"), MentalModel("Mira", "y")
    a.sources.append(1)
    assert b.sources == [] and (b.created_turn_id, b.updated_turn_id, b.stale, b.model_id) == (0, 0, False, None)


def test_upsert_creates_then_updates_in_place(save):
    mid = MM.upsert_mental_model("s1", "Kael", "A smuggler.", 2, [5, 6, 5])
    assert mid is not None
    again = MM.upsert_mental_model("s1", "kael", "A smuggler who repays.", 7, [5])
    assert again == mid and MM.count_mental_models("s1") == 1
    (model,) = MM.get_mental_models("s1")
    assert model == MentalModel("Kael", "A smuggler who repays.", [5], 2, 7, False, mid)
    row = MentalModelRow.objects.get(pk=mid)
    assert row.versions == [
        {"turn_id": 2, "summary": "A smuggler.", "sources": [5, 6]},
        {"turn_id": 7, "summary": "A smuggler who repays.", "sources": [5]},
    ]


def test_upsert_skips_blank_and_defaults_sources(save):
    assert MM.upsert_mental_model("s1", "Kael", "   ", 1) is None
    mid = MM.upsert_mental_model("s1", "Kael", "x", 1)
    assert MM.upsert_mental_model("s1", "Kael", "", 2) is None
    (model,) = MM.get_mental_models("s1")
    assert model.summary == "x" and model.sources == [] and model.model_id == mid


def test_upsert_twice_in_one_turn_keeps_one_version(save):
    mid = MM.upsert_mental_model("s1", "", "world v1", 3)
    MM.upsert_mental_model("s1", "", "world v2", 3)
    assert [v["summary"] for v in MentalModelRow.objects.get(pk=mid).versions] == ["world v2"]


def test_get_mental_models_order_and_filters(save):
    a = MM.upsert_mental_model("s1", "Kael", "k", 1)
    b = MM.upsert_mental_model("s1", "", "w", 2)
    c = MM.upsert_mental_model("s1", "Mira", "m", 5)
    MM.upsert_mental_model("s1", "Kael", "k2", 5)  # ties with Mira on updated: newer id first
    assert [m.model_id for m in MM.get_mental_models("s1")] == [c, a, b]
    assert [m.subject for m in MM.get_mental_models("s1", max_turn_id=2)] == ["Kael", ""]
    assert [m.summary for m in MM.get_mental_models("s1", subject="")] == ["w"]
    assert [m.summary for m in MM.get_mental_models("s1", subject="MIRA")] == ["m"]
    assert [m.model_id for m in MM.get_mental_models("s1", limit=2)] == [c, a]
    assert MM.get_mental_models("s1", limit=0) == []


def test_stale_subjects_oldest_first_and_capped(save):
    for turn, subject in enumerate(["A", "B", "C", "D", "E", "F", "G"], start=1):
        MM.upsert_mental_model("s1", subject, f"{subject} summary", turn)
    MentalModelRow.objects.filter(subject__in=["B", "D", "E", "F", "G"]).update(stale=True)
    MentalModelRow.objects.filter(subject="G").update(updated_turn_id=0)  # oldest update
    assert MM.stale_subjects("s1") == ["G", "B", "D", "E", "F"]
    assert MM.stale_subjects("s1", limit=2) == ["G", "B"]
    assert MM.stale_subjects("s1", max_turn_id=4) == ["B", "D"]
    assert MM.stale_subjects("s1", limit=0) == []
    MM.upsert_mental_model("s1", "B", "B refreshed", 9)  # a refresh clears the flag
    assert "B" not in MM.stale_subjects("s1")


def test_rollback_restores_version_as_of_target(save):
    MM.upsert_mental_model("s1", "Kael", "v1", 1, [1])
    MM.upsert_mental_model("s1", "Kael", "v2", 3, [1, 2])
    MM.upsert_mental_model("s1", "Kael", "v3", 6, [1, 2, 3])
    MM.upsert_mental_model("s1", "Mira", "late", 5)
    MM.upsert_mental_model("s1", "", "world", 2)
    assert MM.rollback_mental_models_standalone("s1", 4) == {"deleted": 1, "updated": 1}
    kael = MM.get_mental_models("s1", subject="Kael")[0]
    assert (kael.summary, kael.sources, kael.updated_turn_id, kael.stale) == ("v2", [1, 2], 4, True)
    world = MM.get_mental_models("s1", subject="")[0]
    assert not world.stale and world.updated_turn_id == 2
    assert [v["turn_id"] for v in MentalModelRow.objects.get(pk=kael.model_id).versions] == [1, 3]
    assert MM.stale_subjects("s1") == ["Kael"]
    assert MM.rollback_mental_models_standalone("s1", 0) == {"deleted": 2, "updated": 0}
    assert MM.count_mental_models("s1") == 0


def test_rollback_without_versions_keeps_summary_as_fallback(save):
    MentalModelRow.objects.create(game_save=save, subject="Old", summary="legacy", created_turn_id=1, updated_turn_id=9)
    assert MM.rollback_mental_models("s1", 5) == {"deleted": 0, "updated": 1}
    (model,) = MM.get_mental_models("s1")
    assert model.summary == "legacy" and model.stale and model.updated_turn_id == 5


def test_conn_variant_runs_in_the_callers_transaction(save):
    from django.db import transaction

    MM.upsert_mental_model("s1", "Kael", "v1", 1)
    MM.upsert_mental_model("s1", "Kael", "v2", 5)
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            assert MM.rollback_mental_models("s1", 2) == {"deleted": 0, "updated": 1}
            raise RuntimeError("the caller's later step fails")
    assert MM.get_mental_models("s1")[0].summary == "v2"
