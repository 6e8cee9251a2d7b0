"""`/context` answers with a catastrophic regex key in the book and a turn that sets it off.

Before the fix a turn holding the text made every `/context` on the save hang; now the key
runs out of time, counts as not matching, and the explanation says so. No timing asserted.
"""

from __future__ import annotations

import pytest

from studio.world.models import Event, LoreEntry
from studio.memory.lore_activation import REGEX_BUDGET, REGEX_TIMEOUT
from tests.support.regex_bombs import BOMB, BOMB_TEXT, bomb_keys, store_bomb

pytestmark = pytest.mark.django_db


def test_context_api_answers_for_a_member_without_a_role(make_api, member_without_role, universe, game_save):
    store_bomb(universe)
    Event.objects.create(
        game_save=game_save, turn_id=4, player_input=BOMB_TEXT, narrative=f"The clerk reads: {BOMB_TEXT}"
    )
    game_save.current_turn = 4
    game_save.save()
    response = make_api(member_without_role).post(
        f"/api/v1/saves/{game_save.save_id}/context", {"query_text": "what now?"}
    )
    assert response.status_code == 200
    explain = {row["entry_id"]: row for row in response.json()["lore_explain"]}
    assert explain["kael"]["regex_timeouts"] == [BOMB] and not explain["kael"]["activated"]
    assert any("ran past its 100 ms limit" in reason for reason in explain["kael"]["reasons"])


def test_context_bounds_the_time_of_many_keys_past_their_limit(
    make_api, member_without_role, universe, game_save, limit_hits
):
    # Before: each such key paid the full limit (300 keys = 30 s, past gunicorn's timeout).
    keys = bomb_keys(30)
    for n, key in enumerate(keys):
        LoreEntry.objects.create(universe=universe, entry_id=f"bomb-{n}", title=f"Bomb {n}", keys=[key], text="x")
    Event.objects.create(
        game_save=game_save, turn_id=4, player_input="I read it.", narrative=f"The clerk reads: {BOMB_TEXT}"
    )
    game_save.current_turn = 4
    game_save.save()
    response = make_api(member_without_role).post(
        f"/api/v1/saves/{game_save.save_id}/context", {"query_text": "what now?"}
    )
    assert response.status_code == 200
    explain = {row["entry_id"]: row for row in response.json()["lore_explain"]}
    assert 0 < len(limit_hits) <= int(REGEX_BUDGET / REGEX_TIMEOUT) + 1
    assert all(explain[f"bomb-{n}"]["regex_timeouts"] == [key] for n, key in enumerate(keys))
