"""axiom.observations: trends, belief storage, consolidation, rollback."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from studio.memory import observations as O
from studio.memory.facts import Fact, insert_facts
from studio.memory.models import Observation as ObservationRow
from studio.memory.observations import Observation, compute_trend
from studio.world.models import Save, Universe


@dataclass
class Action:  # the shape of consolidate.ConsolidationAction
    kind: str
    statement: str = ""
    subject: str = ""
    observation_id: int | None = None
    source_fact_ids: list[int] = field(default_factory=list)


@pytest.fixture
def save(db):
    world = Universe.objects.create(name="W", slug="w")
    return Save.objects.create(universe=world, name="S", save_id="s1", current_turn=10)


# -- compute_trend -------------------------------------------------------------------------


def test_trend_constants():
    assert O.TRENDS == ("new", "strengthening", "weakening", "stale", "stable")
    assert (O.TREND_NEW, O.TREND_STALE, O.TREND_STABLE) == ("new", "stale", "stable")


@pytest.mark.parametrize(
    "turns, now, expected",
    [
        ([], 100, O.TREND_STABLE),  # no sources: unknown
        ([5, 6], None, O.TREND_STABLE),  # no current turn: unknown
        ([90, 95, 100], 100, O.TREND_NEW),  # all recent (window 86..100)
        ([86], 100, O.TREND_NEW),  # boundary: 100 - 15 < 86
        ([85], 100, O.TREND_STALE),  # boundary: 85 is not recent
        ([10, 40, 60], 100, O.TREND_STALE),  # nothing recent
        # 10 recent, 1 older: (10/15) / (1/30) = 20 -> strengthening
        ([91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 60], 100, O.TREND_STRENGTHENING),
        # 1 recent, 10 older: (1/15) / (10/30) = 0.2 -> weakening
        ([100] + list(range(60, 70)), 100, O.TREND_WEAKENING),
        # 1 recent, 2 older: (1/15) / (2/30) = 1.0 -> stable
        ([100, 70, 60], 100, O.TREND_STABLE),
        # 3 recent, 4 older: ratio (3/15)/(4/30) = 1.5, not > 1.5 -> stable
        ([100, 99, 98, 70, 69, 68, 67], 100, O.TREND_STABLE),
        # exactly 0.5 is not < 0.5 -> stable: (1/15)/(4/30) = 0.5
        ([100, 70, 69, 68, 67], 100, O.TREND_STABLE),
        # older evidence beyond the old window still counts as older (Hindsight's rule)
        ([100, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 100, O.TREND_WEAKENING),
        # sources beyond the horizon are ignored
        ([120, 130], 100, O.TREND_STABLE),
        ([50, 120], 100, O.TREND_STALE),
    ],
)
def test_compute_trend(turns, now, expected):
    assert compute_trend(turns, now) == expected


def test_compute_trend_windows_are_parameters():
    assert compute_trend([40], 100) == O.TREND_STALE
    assert compute_trend([40], 100, recent_turns=70, old_turns=200) == O.TREND_NEW
    # 2 recent in 5 turns vs 2 older over 5 turns -> 1.0
    assert compute_trend([99, 100, 91, 92], 100, recent_turns=5, old_turns=10) == O.TREND_STABLE
    assert compute_trend([99, 100, 91], 100, recent_turns=5, old_turns=10) == O.TREND_STRENGTHENING


def test_observation_trend_reads_source_turns():
    obs = Observation("x", sources=[{"fact_id": 1, "turn_id": 3}, {"fact_id": 2, "turn_id": 4}])
    assert obs.trend(5) == O.TREND_NEW
    assert obs.trend(100) == O.TREND_STALE
    assert obs.trend(None) == O.TREND_STABLE
    assert Observation("y").trend(5) == O.TREND_STABLE


def test_observation_defaults_are_independent():
    a, b = Observation("a"), Observation("b")
    a.sources.append({"fact_id": 1, "turn_id": 1})
    a.history.append({})
    assert b.sources == [] and b.history == []
    assert (a.subject, a.proof_count, a.created_turn_id, a.stale, a.observation_id) == ("", 1, 0, False, None)


# -- insert / get / count ------------------------------------------------------------------


def test_insert_observation_derives_proof_count_and_records_create(save):
    obs = Observation(
        "Kael fears the sea.",
        subject="Kael",
        proof_count=99,
        sources=[{"fact_id": 1, "turn_id": 2}, {"fact_id": 3, "turn_id": 4}],
        created_turn_id=4,
        updated_turn_id=4,
    )
    oid = O.insert_observation("s1", obs)
    assert oid == obs.observation_id and oid is not None
    row = ObservationRow.objects.get(pk=oid)
    assert row.proof_count == 2 and row.last_source_turn == 4 and row.subject_key == "kael"
    assert row.history == [
        {
            "action": "CREATE",
            "turn_id": 4,
            "statement": "Kael fears the sea.",
            "subject": "Kael",
            "sources_added": [{"fact_id": 1, "turn_id": 2}, {"fact_id": 3, "turn_id": 4}],
        }
    ]
    assert O.insert_observation("s1", Observation("   ")) is None
    assert O.count_observations("s1") == 1


def test_get_observations_order_filters_and_ties(save):
    def add(statement, subject, created, updated):
        return O.insert_observation(
            "s1", Observation(statement, subject=subject, created_turn_id=created, updated_turn_id=updated)
        )

    a = add("a", "Kael", 1, 5)
    b = add("b", "", 2, 7)
    c = add("c", "KAEL", 3, 5)  # ties with a on updated_turn_id: newer id first
    d = add("d", "Mira", 8, 8)
    assert [o.observation_id for o in O.get_observations("s1")] == [d, b, c, a]
    assert [o.statement for o in O.get_observations("s1", max_turn_id=2)] == ["b", "a"]
    assert [o.statement for o in O.get_observations("s1", subject="kael")] == ["c", "a"]
    assert [o.statement for o in O.get_observations("s1", subject="")] == ["b"]
    assert [o.statement for o in O.get_observations("s1", limit=1)] == ["d"]
    assert O.get_observations("s1", limit=0) == []
    assert O.get_observations("s1", subject="Nobody") == []


# -- apply_consolidation -------------------------------------------------------------------


def test_apply_consolidation_create_update_delete(save):
    f1, f2 = insert_facts("s1", 3, [Fact("Kael lies."), Fact("Kael steals.")])
    (f3,) = insert_facts("s1", 5, [Fact("Kael confesses.")])
    counts = O.apply_consolidation(
        "s1",
        3,
        [
            Action("CREATE", "Kael is dishonest.", "Kael", source_fact_ids=[f1, f2, f2]),
            Action("create", "   ", "Kael", source_fact_ids=[f1]),  # empty: skipped
            {"kind": "CREATE", "statement": "The world is grey.", "subject": "", "source_fact_ids": []},
        ],
        {f1: 3, f2: 3},
    )
    assert counts == {"created": 2, "updated": 0, "deleted": 0, "skipped": 1, "merged": 0}
    kael, world = sorted(O.get_observations("s1"), key=lambda o: o.statement)
    assert kael.sources == [{"fact_id": f1, "turn_id": 3}, {"fact_id": f2, "turn_id": 3}]
    assert kael.proof_count == 2 and kael.created_turn_id == 3 and kael.updated_turn_id == 3
    assert world.proof_count == 0 and world.subject == ""

    counts = O.apply_consolidation(
        "s1",
        5,
        [
            Action("UPDATE", "Kael confessed his lies.", "", kael.observation_id, [f3, f1]),
            Action("UPDATE", "x", "", 999999, [f3]),  # unknown belief
            Action("UPDATE", "", "", kael.observation_id, [f3]),  # empty statement
            Action("DELETE", observation_id=world.observation_id),
            Action("DELETE", observation_id=424242),
            Action("SHRUG", "x"),
            {"kind": "UPDATE", "statement": "y", "observation_id": "not-an-id"},
        ],
        {f3: 5},
    )
    assert counts == {"created": 0, "updated": 1, "deleted": 1, "skipped": 5, "merged": 0}
    (kael,) = O.get_observations("s1")
    assert kael.statement == "Kael confessed his lies." and kael.subject == "Kael"  # blank subject kept
    assert [s["fact_id"] for s in kael.sources] == [f1, f2, f3] and kael.proof_count == 3
    assert kael.updated_turn_id == 5 and kael.created_turn_id == 3
    assert [(h["action"], h["turn_id"], h["statement"]) for h in kael.history] == [
        ("CREATE", 3, "Kael is dishonest."),
        ("UPDATE", 5, "Kael confessed his lies."),
    ]
    assert kael.history[1]["sources_added"] == [{"fact_id": f3, "turn_id": 5}]
    assert O.count_observations("s1") == 1  # the world belief is retired...
    tomb = ObservationRow.all_objects.get(pk=world.observation_id)
    assert tomb.deleted_turn_id == 5 and tomb.history[-1]["action"] == "DELETE"  # ...but kept for rewinds
    assert O.apply_consolidation("s1", 6, [], {}) == {
        "created": 0,
        "updated": 0,
        "deleted": 0,
        "skipped": 0,
        "merged": 0,
    }


def test_apply_consolidation_source_turns_come_from_map_or_facts(save, db):
    (f1,) = insert_facts("s1", 2, [Fact("a")])
    other = Save.objects.create(universe=save.universe, name="o", save_id="o1")
    (foreign,) = insert_facts("o1", 1, [Fact("b")])
    O.apply_consolidation("s1", 4, [Action("CREATE", "c", source_fact_ids=[f1, foreign, 123456])], {})
    (obs,) = O.get_observations("s1")
    # f1's turn is looked up; a fact of another save and an unknown id are dropped.
    assert obs.sources == [{"fact_id": f1, "turn_id": 2}]
    O.apply_consolidation("s1", 4, [Action("CREATE", "d", source_fact_ids=[f1])], {f1: 9})
    assert O.get_observations("s1", limit=1)[0].sources == [{"fact_id": f1, "turn_id": 9}]
    assert other.pk


def test_update_can_move_a_belief_to_another_subject(save):
    O.apply_consolidation("s1", 1, [Action("CREATE", "s", "Kael")], {})
    (obs,) = O.get_observations("s1")
    O.apply_consolidation("s1", 2, [Action("UPDATE", "s2", "Mira", obs.observation_id)], {})
    assert O.get_observations("s1", subject="kael") == []
    assert O.get_observations("s1", subject="MIRA")[0].statement == "s2"


# -- rollback ------------------------------------------------------------------------------


def test_rollback_restores_exact_state(save):
    (f1,) = insert_facts("s1", 1, [Fact("a")])
    (f2,) = insert_facts("s1", 3, [Fact("b")])
    (f3,) = insert_facts("s1", 6, [Fact("c")])
    O.apply_consolidation("s1", 1, [Action("CREATE", "v1", "Kael", source_fact_ids=[f1])], {})
    (obs,) = O.get_observations("s1")
    oid = obs.observation_id
    O.apply_consolidation("s1", 3, [Action("UPDATE", "v2", "Kael", oid, [f2])], {})
    # Turn 6 adds a new fact and re-cites an old one (f1 already present, f2 too).
    O.apply_consolidation("s1", 6, [Action("UPDATE", "v3", "Mira", oid, [f3])], {})
    O.apply_consolidation("s1", 7, [Action("CREATE", "late", "", source_fact_ids=[f1])], {})
    assert O.rollback_observations_standalone("s1", 4) == {"deleted": 1, "updated": 1}
    (obs,) = O.get_observations("s1")
    assert (obs.statement, obs.subject) == ("v2", "Kael")
    assert obs.sources == [{"fact_id": f1, "turn_id": 1}, {"fact_id": f2, "turn_id": 3}] and obs.proof_count == 2
    assert [h["turn_id"] for h in obs.history] == [1, 3]
    assert obs.stale and obs.updated_turn_id == 4
    row = ObservationRow.objects.get(pk=oid)
    assert row.subject_key == "kael" and row.last_source_turn == 3
    # A second rollback that changes nothing reports nothing.
    assert O.rollback_observations_standalone("s1", 4) == {"deleted": 0, "updated": 0}


def test_rollback_drops_later_sources_cited_from_earlier_turns(save):
    (f1,) = insert_facts("s1", 1, [Fact("a")])
    (f2,) = insert_facts("s1", 2, [Fact("b")])
    O.apply_consolidation("s1", 2, [Action("CREATE", "one", source_fact_ids=[f1])], {})
    oid = O.get_observations("s1")[0].observation_id
    # Turn 5 cites f2 (a turn-2 fact): at turn 3 the belief did not have it yet.
    O.apply_consolidation("s1", 5, [Action("UPDATE", "two", "", oid, [f2])], {})
    assert O.rollback_observations_standalone("s1", 3) == {"deleted": 0, "updated": 1}
    (obs,) = O.get_observations("s1")
    assert obs.sources == [{"fact_id": f1, "turn_id": 1}] and obs.statement == "one"


def test_rollback_without_turn_stamped_trail_follows_the_seed_rule(save):
    # A belief written with a hand-made history (no sources_added): statement kept, sources filtered.
    O.insert_observation(
        "s1",
        Observation(
            "legacy",
            sources=[{"fact_id": 1, "turn_id": 2}, {"fact_id": 2, "turn_id": 8}],
            history=[{"action": "CREATE", "turn_id": 2}],
            created_turn_id=2,
            updated_turn_id=8,
        ),
    )
    assert O.rollback_observations("s1", 5) == {"deleted": 0, "updated": 1}
    (obs,) = O.get_observations("s1")
    assert obs.statement == "legacy" and obs.sources == [{"fact_id": 1, "turn_id": 2}]
    assert obs.proof_count == 1 and obs.updated_turn_id == 5 and obs.stale


def test_rollback_undoes_a_later_delete_and_keeps_an_earlier_one(save):
    O.apply_consolidation("s1", 1, [Action("CREATE", "a"), Action("CREATE", "b")], {})
    a, b = sorted(O.get_observations("s1"), key=lambda o: o.statement)
    O.apply_consolidation("s1", 2, [Action("DELETE", observation_id=a.observation_id)], {})
    O.apply_consolidation("s1", 4, [Action("DELETE", observation_id=b.observation_id)], {})
    assert O.count_observations("s1") == 0
    assert O.rollback_observations_standalone("s1", 3) == {"deleted": 0, "updated": 1}
    assert [o.statement for o in O.get_observations("s1")] == ["b"]
    assert O.get_observations("s1")[0].stale


def test_rollback_of_unchanged_beliefs_does_not_flag_them(save):
    O.apply_consolidation("s1", 1, [Action("CREATE", "a")], {})
    assert O.rollback_observations_standalone("s1", 1) == {"deleted": 0, "updated": 0}
    assert not O.get_observations("s1")[0].stale
    assert O.rollback_observations_standalone("s1", 0) == {"deleted": 1, "updated": 0}
    assert O.count_observations("s1") == 0


def test_conn_variant_runs_in_the_callers_transaction(save):
    from django.db import transaction

    O.apply_consolidation("s1", 1, [Action("CREATE", "a")], {})
    O.apply_consolidation("s1", 3, [Action("CREATE", "b")], {})
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            assert O.rollback_observations("s1", 2) == {"deleted": 1, "updated": 0}
            assert O.count_observations("s1") == 1
            raise RuntimeError("the caller's later step fails")
    assert sorted(o.statement for o in O.get_observations("s1")) == ["a", "b"]


def _rollback_queries(save_id: str, beliefs: int) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    O.apply_consolidation(save_id, 1, [Action("CREATE", f"b{i}") for i in range(beliefs)], {})
    O.apply_consolidation(
        save_id,
        3,
        [Action("UPDATE", f"b{i}'", "", o.observation_id) for i, o in enumerate(O.get_observations(save_id))],
        {},
    )
    with CaptureQueriesContext(connection) as queries:
        assert O.rollback_observations(save_id, 2) == {"deleted": 0, "updated": beliefs}
    return len(queries)


def test_rollback_reads_every_column_it_restores_in_one_query(save):
    # The changed rows load only the columns the restore rule reads (`restore_from`): a column
    # left out would be fetched row by row, so the query count would grow with the beliefs.
    Save.objects.create(universe=save.universe, name="S2", save_id="s2", current_turn=10)
    assert _rollback_queries("s1", 2) == _rollback_queries("s2", 6)
