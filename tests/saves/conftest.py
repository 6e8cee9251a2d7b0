"""Settings for the checkpoint tests: a failed job attempt is final unless a test says otherwise.

The vector jobs of rewind and fork go through the job ledger, which retries a failed
attempt with backoff up to AXIOM_JOB_MAX_ATTEMPTS. These tests look at one attempt at a
time (FAILED after a failed delete, then each explicit retry), as the memory tests'
`eager_jobs` fixture does; the tests of the automatic retries raise the limit themselves.

`story` (with its `world` and `vector`) is the four-turn living save the rewind and fork tests
both start from. `tester` is the test client logged in as the playtester, for the view tests of the play
controls (their `saves:` URLs come from tests/support/save_urls.py).
"""

from __future__ import annotations

import pytest

from studio.memory import mental_models as MM
from studio.memory.models import Observation as ObservationRow
from studio.memory.models import RecordedQuery
from studio.world.models import Save, Universe
from tests.fakes import FakeVectorMemory

from .scenario import play_turn, snapshot


@pytest.fixture
def tester(client, playtester):
    client.force_login(playtester)
    return client


@pytest.fixture(autouse=True)
def one_attempt_per_job(settings):
    settings.AXIOM_JOB_MAX_ATTEMPTS = 1
    return settings


@pytest.fixture
def world(db):
    return Universe.objects.create(name="Rewind World", slug="rewind-world")


@pytest.fixture
def vector():
    return FakeVectorMemory()


@pytest.fixture
def story(world, vector):
    """Four turns: beliefs created, updated (statement and subject), deleted; models refreshed."""
    save = Save.objects.create(universe=world, name="Story", save_id="story", memory_mode="living")
    snaps = {0: snapshot(save)}
    t1 = play_turn(
        save,
        facts=[("Kael owes Mira ten crowns.", ["Kael", "Mira"]), ("The harbour is closed.", [])],
        actions=[
            {
                "kind": "CREATE",
                "statement": "Kael is in debt to Mira.",
                "subject": "Kael",
                "source_fact_ids": [("new", 0)],
            },
            {"kind": "CREATE", "statement": "The harbour is closed.", "subject": "", "source_fact_ids": [("new", 1)]},
        ],
        vector=vector,
    )
    b1, b2 = ObservationRow.objects.filter(game_save=save).order_by("id").values_list("id", flat=True)
    MM.upsert_mental_model("story", "Kael", "Kael, a smuggler in debt.", 1, [b1])
    snaps[1] = snapshot(save)
    play_turn(
        save,
        facts=[("Kael repaid Mira.", ["Kael", "Mira"])],
        actions=[
            {
                "kind": "UPDATE",
                "observation_id": b1,
                "statement": "Kael repaid Mira.",
                "subject": "Kael",
                "source_fact_ids": [("new", 0)],
            }
        ],
        refresh=[("Kael", "Kael, a smuggler who pays his debts.", [b1])],
        vector=vector,
    )
    snaps[2] = snapshot(save)
    play_turn(
        save,
        facts=[("The harbour reopened.", [])],
        actions=[
            {"kind": "DELETE", "observation_id": b2},
            {"kind": "CREATE", "statement": "Mira trusts Kael.", "subject": "Mira", "source_fact_ids": [("new", 0)]},
        ],
        refresh=[("Mira", "Mira, a lender who trusts Kael.", [])],
        vector=vector,
    )
    snaps[3] = snapshot(save)
    play_turn(
        save,
        facts=[("Kael bought a ship.", ["Kael"])],
        # Cites a turn-1 fact too: after a rewind to 2 that source must not survive.
        actions=[
            {
                "kind": "UPDATE",
                "observation_id": b1,
                "statement": "Captain Kael owns a ship.",
                "subject": "Captain Kael",
                "source_fact_ids": [("new", 0), t1["fact_ids"][1]],
            }
        ],
        refresh=[("Kael", "Captain Kael, shipowner.", [b1])],
        vector=vector,
    )
    RecordedQuery.objects.create(game_save=save, turn_id=4, query_text="ship")
    snaps[4] = snapshot(save)
    return {"save": save, "snaps": snaps, "b1": b1, "b2": b2}
