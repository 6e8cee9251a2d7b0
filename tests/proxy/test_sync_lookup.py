"""Where a chat's window starts in a long save: found through the narrative digest index, not by reading every turn."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from studio.proxy import sync
from studio.world.models import Event, Save

pytestmark = pytest.mark.django_db


def test_the_window_start_is_found_by_its_narrative_digest(universe):
    game_save = Save.objects.create(universe=universe, name="long")
    Event.objects.bulk_create(
        [
            Event(game_save=game_save, turn_id=n, player_input=f"act {n % 7}", narrative=f"Turn {n % 50}: the tide.")
            for n in range(1, 401)
        ]
    )
    Save.objects.filter(pk=game_save.pk).update(current_turn=400)
    game_save.refresh_from_db()
    # "Turn 10" is the narration of turns 10, 60, ..., 360; with "act 3" only 10 and 360 (n % 7 == 3).
    assert sync._same_turns(game_save, ("act 3", "Turn 10: the tide.")) == [360, 10]
    assert sync._same_turns(game_save, ("act 4", "Turn 10: the tide.")) == [60]
    assert sync._same_turns(game_save, ("act 9", "Turn 10: the tide.")) == []
    window = [(e.player_input, e.narrative) for e in Event.objects.filter(game_save=game_save, turn_id__gte=381)]
    assert sync.chat_start(game_save=game_save, chat=sync.Chat(turns=window)) == (381, 20)
    with CaptureQueriesContext(connection) as captured:
        sync._same_turns(game_save, ("act 3", "Turn 10: the tide."))
    (query,) = captured.captured_queries
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL enable_seqscan = off")  # a 400-row table: make the planner show its choice
            cursor.execute("EXPLAIN " + query["sql"])
        else:
            cursor.execute("EXPLAIN QUERY PLAN " + query["sql"])
        plan = " ".join(str(row) for row in cursor.fetchall())
    # The digest is looked up in the index (not only the save: SQLite folds a `narrative = ?` beside it).
    assert "event_narrative_md5" in plan and ("<expr>=?" in plan or "md5(narrative)" in plan), plan
