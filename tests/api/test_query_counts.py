"""Per-request database work of the list endpoints does not grow with the rows listed (no N+1)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from studio.world.models import Save
from studio.saves.services import turn_append

pytestmark = pytest.mark.django_db


def queries(api, path, params=None) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = api.get(path, params)
    assert response.status_code == 200, response.content[:300]
    # The token's own bookkeeping (authentication, last-used time) is not about the rows listed.
    return len([q for q in captured.captured_queries if "api_apitoken" not in q["sql"]])


def test_list_endpoints_do_a_constant_number_of_queries(api, game_save, states):
    base = f"/api/v1/saves/{game_save.save_id}"
    paths = [
        ("/api/v1/saves", None),
        ("/api/v1/universes", None),
        (f"{base}/turns", {"include_state": "1"}),
        (f"{base}/jobs", None),
    ]
    before = {path: queries(api, path, params) for path, params in paths}
    for n in range(4):
        Save.objects.create(universe=game_save.universe, name=f"More {n}", save_id=f"more{n}")
        turn_append(game_save=game_save, player_input="", narrative=f"Turn {n}.", state={"n": n})
    after = {path: queries(api, path, params) for path, params in paths}
    assert after == before
