"""Reads of living memory (studio/memory/selectors.py): what each returns, and in how many queries."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from studio.memory import selectors
from studio.memory.models import Fact, Job, JobKind, JobStatus, MentalModel, Observation
from studio.world.models import Save

pytestmark = pytest.mark.django_db


@pytest.fixture
def save60(game_save):
    game_save.memory_mode = "living"
    game_save.current_turn = 60
    game_save.save()
    return game_save


def belief(game_save, statement, *, turns=(), subject="Kaël", stale=False, created=0, updated=0, **extra):
    return Observation.objects.create(
        game_save=game_save,
        statement=statement,
        subject=subject,
        sources=[{"fact_id": 1000 + t, "turn_id": t} for t in turns],
        stale=stale,
        created_turn_id=created,
        updated_turn_id=updated,
        **extra,
    )


def test_belief_page_sets_trends_at_the_current_turn_in_two_queries(save60):
    new = belief(save60, "Recent only.", turns=[55, 58])
    old = belief(save60, "Nothing recent.", turns=[2])
    rising = belief(save60, "More lately.", subject="Mira", turns=[20, 50, 56, 58, 59])
    with CaptureQueriesContext(connection) as few:
        page = selectors.belief_page(game_save=save60)
    trends = {b.pk: b.trend for b in page.object_list}
    assert trends == {new.pk: "new", old.pk: "stale", rising.pk: "strengthening"}
    for i in range(40):
        belief(save60, f"Extra {i}.", subject=f"S{i % 4}", turns=[i + 1])
    with CaptureQueriesContext(connection) as many:
        page = selectors.belief_page(game_save=save60, per_page=20)
    assert len(few) == len(many) == 2  # the paginator's count and the page
    assert len(page.object_list) == 20 and all(b.trend for b in page.object_list)
    mira = selectors.belief_page(game_save=save60, subject_key="mira")
    assert [b.statement for b in mira.object_list] == ["More lately."]


def test_belief_page_skips_malformed_sources(save60):
    broken = Observation.objects.create(
        game_save=save60, statement="Odd sources.", subject="Kaël", sources=[{"turn_id": 58}]
    )
    Observation.objects.filter(pk=broken.pk).update(sources=["junk", {"turn_id": "x"}, {"turn_id": 59}])
    (row,) = selectors.belief_page(game_save=save60).object_list
    assert selectors.source_turns(row) == [59] and row.trend == "new"


def test_belief_sources_join_their_facts_in_one_query(save60):
    kept = Fact.objects.create(game_save=save60, turn_id=5, statement="Kaël docks.")
    b = Observation.objects.create(
        game_save=save60,
        statement="Kaël trades.",
        subject="Kaël",
        sources=[{"fact_id": 999999, "turn_id": 9}, {"fact_id": kept.pk, "turn_id": 5}],
    )
    with CaptureQueriesContext(connection) as queries:
        sources = selectors.belief_sources(game_save=save60, belief=b)
    assert len(queries) == 1
    assert [(s["turn_id"], s["fact"]) for s in sources] == [(5, kept), (9, None)]


def test_belief_sources_never_show_another_saves_fact(save60, universe):
    other = Save.objects.create(universe=universe, name="other")
    foreign = Fact.objects.create(game_save=other, turn_id=1, statement="Not yours.")
    b = Observation.objects.create(game_save=save60, statement="x", sources=[{"fact_id": foreign.pk, "turn_id": 1}])
    assert selectors.belief_sources(game_save=save60, belief=b)[0]["fact"] is None


def test_mental_model_list_attaches_the_first_sources_in_two_queries(save60):
    beliefs = [belief(save60, f"B{i}", turns=[i + 1]) for i in range(12)]
    retired = belief(save60, "Retired.", deleted_turn_id=30)
    model = MentalModel.objects.create(
        game_save=save60, subject="Kaël", summary="x", sources=[retired.pk, 987654] + [b.pk for b in beliefs]
    )
    with CaptureQueriesContext(connection) as queries:
        (listed,) = selectors.mental_model_list(game_save=save60, sources_shown=4)
    assert len(queries) == 2
    assert listed.pk == model.pk
    assert [b.statement for b in listed.source_beliefs] == ["Retired.", "B0", "B1"]  # retired ones are still listed
    assert listed.missing_sources == 1 and listed.more_sources == 10
    for i in range(20):
        MentalModel.objects.create(game_save=save60, subject=f"S{i}", summary="y", sources=[beliefs[i % 12].pk])
    with CaptureQueriesContext(connection) as many:
        assert len(selectors.mental_model_list(game_save=save60)) == 21
    assert len(many) == 2


def test_belief_list_at_turn_filters_in_one_query(save60):
    belief(save60, "Created later.", turns=[50], created=50, updated=50)
    flagged = belief(save60, "Flagged.", turns=[10], created=10, updated=12, stale=True)
    plain = belief(save60, "Plain.", subject="Mira", turns=[10], created=10, updated=11)
    with CaptureQueriesContext(connection) as queries:
        at_20 = selectors.belief_list_at_turn(game_save=save60, horizon=20)
    assert len(queries) == 1
    assert [b.observation_id for b in at_20] == [flagged.pk, plain.pk]  # most recently updated first
    assert [b.statement for b in selectors.belief_list_at_turn(game_save=save60, horizon=20, stale=True)] == [
        "Flagged."
    ]
    assert [b.statement for b in selectors.belief_list_at_turn(game_save=save60, horizon=20, stale=False)] == ["Plain."]
    assert [b.statement for b in selectors.belief_list_at_turn(game_save=save60, horizon=60, subject="MIRA")] == [
        "Plain."
    ]
    assert [b.statement for b in selectors.belief_list_at_turn(game_save=save60, horizon=60, offset=1, limit=1)] == [
        "Flagged."
    ]


def test_belief_list_at_turn_trend_is_read_at_the_horizon_and_paged_after_filtering(save60):
    for i in range(30):
        # Even: evidence only at turn 5 (new at 10, stale at 60); odd: evidence at 55 (created then).
        turn = 5 if i % 2 == 0 else 55
        belief(save60, f"B{i:02}", turns=[turn], created=turn, updated=100 - i)
    everything = selectors.belief_list_at_turn(game_save=save60, horizon=60)
    expected_stale = [b.statement for b in everything if b.trend(60) == "stale"]
    assert expected_stale == [f"B{i:02}" for i in range(0, 30, 2)]
    with CaptureQueriesContext(connection) as queries:
        first = selectors.belief_list_at_turn(game_save=save60, horizon=60, trend="stale", limit=4)
    assert len(queries) == 1
    assert [b.statement for b in first] == expected_stale[:4]
    paged = []
    for offset in range(0, 20, 4):
        paged += [
            b.statement
            for b in selectors.belief_list_at_turn(game_save=save60, horizon=60, trend="stale", offset=offset, limit=4)
        ]
    assert paged == expected_stale
    at_10 = selectors.belief_list_at_turn(game_save=save60, horizon=10, trend="new")
    assert [b.statement for b in at_10] == expected_stale  # the same beliefs were new back then
    assert (
        selectors.belief_list_at_turn(game_save=save60, horizon=60, trend="new", limit=3)
        == [b for b in everything if b.trend(60) == "new"][:3]
    )


def test_fact_list_at_turn_pages_at_the_horizon(save60):
    for turn in (1, 2, 3, 30, 61):
        Fact.objects.create(game_save=save60, turn_id=turn, statement=f"Kaël at {turn}.", entities=["Kaël"])
        Fact.objects.create(game_save=save60, turn_id=turn, statement=f"Mira at {turn}.", entities=["Mira"])
    with CaptureQueriesContext(connection) as queries:
        facts = selectors.fact_list_at_turn(game_save=save60, horizon=60)
    assert len(queries) == 1
    assert [f.turn_id for f in facts] == [30, 30, 3, 3, 2, 2, 1, 1]
    kael = selectors.fact_list_at_turn(game_save=save60, horizon=60, entity="KAËL", offset=1, limit=2)
    assert [f.statement for f in kael] == ["Kaël at 3.", "Kaël at 2."]
    assert len(selectors.fact_list_at_turn(game_save=save60, horizon=60, entity="")) == 8  # blank: no filter


def test_mental_model_list_at_turn(save60):
    MentalModel.objects.create(game_save=save60, subject="Kaël", summary="k", created_turn_id=5, updated_turn_id=40)
    MentalModel.objects.create(game_save=save60, subject="", summary="w", created_turn_id=2, updated_turn_id=50)
    MentalModel.objects.create(game_save=save60, subject="Later", summary="l", created_turn_id=58, updated_turn_id=58)
    assert [m.summary for m in selectors.mental_model_list_at_turn(game_save=save60, horizon=60)] == ["l", "w", "k"]
    assert [m.summary for m in selectors.mental_model_list_at_turn(game_save=save60, horizon=10)] == ["w", "k"]
    assert [m.summary for m in selectors.mental_model_list_at_turn(game_save=save60, horizon=60, subject="")] == ["w"]
    assert [
        m.summary for m in selectors.mental_model_list_at_turn(game_save=save60, horizon=60, offset=1, limit=1)
    ] == ["w"]


def test_job_list_filters_and_joins_the_save(game_save, universe):
    other = Save.objects.create(universe=universe, name="other")
    mine = [
        Job.objects.create(game_save=game_save, universe=universe, kind=JobKind.EMBED_TURN, turn_id=t, status=s)
        for t, s in ((1, JobStatus.DONE), (2, JobStatus.FAILED), (2, JobStatus.QUEUED))
    ]
    foreign = Job.objects.create(game_save=other, universe=universe, kind=JobKind.EMBED_TURN, turn_id=1)
    assert [j.pk for j in selectors.job_list(game_save=game_save)] == [j.pk for j in reversed(mine)]  # newest first
    assert [j.pk for j in selectors.job_list(game_save=game_save, turn_id=2, status=JobStatus.FAILED)] == [mine[1].pk]
    assert list(selectors.job_list(game_save=game_save, kind=JobKind.REFRESH_MODELS)) == []
    with CaptureQueriesContext(connection) as queries:
        jobs = list(selectors.job_list(game_save=game_save))
        assert {j.game_save.save_id for j in jobs} == {game_save.save_id}
    assert len(queries) == 1
    assert selectors.job_get(game_save=game_save, job_id=mine[0].pk) == mine[0]
    assert selectors.job_get(game_save=game_save, job_id=foreign.pk) is None
