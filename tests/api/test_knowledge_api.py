"""The API's who-knows-what: `present` and `reveals` in an appended turn's state, `pov` on
context and query (docs/knowledge.md)."""

from __future__ import annotations

import pytest

from studio.memory.knowledge.models import Presence, Reveal

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(make_api, playtester):
    return make_api(playtester)


def base(save):
    return f"/api/v1/saves/{save.save_id}"


def test_append_records_presence_and_reveals_and_refuses_a_bad_state(api, living, no_runner, fake_vectors):
    ok = api.post(
        base(living) + "/turns",
        {
            "narrative": "Kael whispers.",
            "state": {
                "present": ["Kay", "the captain"],
                "location": "dock",
                "reveals": [{"to": "Mira", "entry": "ledger", "from": "Kael"}],
            },
        },
    )
    assert ok.status_code == 201, ok.content
    assert Presence.objects.get(game_save=living, turn_id=1).characters == ["Kael", "Mira"]
    assert Reveal.objects.get(game_save=living).character == "Mira"
    bad = api.post(base(living) + "/turns", {"narrative": "x", "state": {"present": "Mira"}})
    assert bad.status_code == 400 and "present" in bad.json()["error"]["message"]
    unknown = api.post(
        base(living) + "/turns", {"narrative": "x", "state": {"reveals": [{"to": "Mira", "entry": "nope"}]}}
    )
    assert unknown.status_code == 400
    living.refresh_from_db()
    assert living.current_turn == 1  # nothing half-written


def test_context_pov_and_query_pov(api, living, no_runner, vector_memory):
    api.post(base(living) + "/turns", {"narrative": "Kael hides the ledger.", "state": {"present": ["Kael"]}})
    api.post(base(living) + "/turns", {"narrative": "Mira waits at the ledger stall.", "state": {"present": ["Mira"]}})
    vector_memory.embed_chunks(
        living.save_id,
        [{"turn_id": 1, "text": "Kael hides the ledger."}, {"turn_id": 2, "text": "Mira waits at the ledger stall."}],
    )
    context = api.post(base(living) + "/context", {"query_text": "the ledger", "pov": ["Mira"]}).json()
    assert [c["name"] for c in context["pov"]["characters"]] == ["Mira"]
    assert any(e["why"] == "Mira was not present at turn 1" for e in context["pov"]["explain"])
    off = api.get(base(living) + "/context", {"query_text": "the ledger", "pov": "none"}).json()
    assert off["pov"] is None
    query = api.post(base(living) + "/query", {"query_text": "ledger", "pov": ["Mira"]}).json()
    assert {r["turn_id"] for r in query["results"]} == {2}
    assert query["pov_left_out"] and "Mira was not present at turn 1" in query["pov_left_out"][0]["why"]


def test_none_in_a_pov_list_means_no_one_on_context_as_on_narrate(api, living, no_runner, vector_memory):
    # One rule for the API's `pov` (schemas.pov_names): "none" is never a character's name.
    api.post(base(living) + "/turns", {"narrative": "Mira waits at the ledger stall.", "state": {"present": ["Mira"]}})
    mixed = api.post(base(living) + "/context", {"query_text": "the ledger", "pov": ["Mira", "None"]}).json()
    assert [c["name"] for c in mixed["pov"]["characters"]] == ["Mira"]
    off = api.post(base(living) + "/context", {"query_text": "the ledger", "pov": ["none"]}).json()
    assert off["pov"] is None
