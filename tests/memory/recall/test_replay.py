"""Replay after a lore change: recorded queries re-run at their horizon, before vs after."""

from __future__ import annotations

import pytest
from django.urls import reverse

from studio.memory.recall.context import build_memory_context
from studio.memory.models import Job, JobKind, JobStatus, RecordedQuery
from studio.memory.recall.replay import replay_recorded_queries
from studio.saves.checkpoints import CheckpointManager
from studio.universes.models import LoreRevision

pytestmark = pytest.mark.django_db

LORE = [
    {"entry_id": "kael", "title": "Kaël", "text": "Kaël is a smuggler of Port Vey."},
    {"entry_id": "mira", "title": "Mira", "text": "Mira lends money to sailors."},
    {"entry_id": "storm", "title": "The Storm", "text": "Storms come from the west."},
]


@pytest.fixture
def recorded_save(game_save, vector_memory):
    vector_memory.embed_chunks(
        game_save.save_id,
        [
            {"turn_id": 1, "text": "Kaël docks with contraband."},
            {"turn_id": 2, "text": "Mira lends Kaël ten crowns."},
            {"turn_id": 3, "text": "The storm breaks over the harbour."},
        ],
    )
    vector_memory.sync_lore(game_save.save_id, LORE)
    # Play records the context queries of turns 2 and 3.
    game_save.current_turn = 2
    build_memory_context(game_save=game_save, query_text="who lends money", record=True, k_lore=1)
    game_save.current_turn = 3
    build_memory_context(game_save=game_save, query_text="the storm over the harbour", record=True, k_lore=1)
    game_save.save()
    return game_save


def test_nothing_changed_means_every_query_the_same(recorded_save):
    report = replay_recorded_queries(game_save=recorded_save)
    assert len(report.queries) == 4 and not report.changed and report.top_changed_count == 0


def test_a_lore_edit_changes_the_lore_queries_it_touches(recorded_save, vector_memory):
    before = {q.query_text: q.result_ids for q in RecordedQuery.objects.filter(params__chunk_type="lore")}
    assert before["who lends money"] == ["lore:mira"]
    edited = [dict(e) for e in LORE]
    edited[2]["text"] = "Storms lend money to nobody; who lends money? Not the storm."
    edited[1]["text"] = "A quiet shop."
    vector_memory.sync_lore(recorded_save.save_id, edited)
    report = replay_recorded_queries(game_save=recorded_save)
    changed = {q.recorded.query_text: q for q in report.changed}
    assert list(changed) == ["who lends money"]
    query = changed["who lends money"]
    assert query.before == ["lore:mira"] and query.after == ["lore:storm"] and query.top_changed
    assert query.added == ["lore:storm"] and query.removed == ["lore:mira"]
    assert {m["entry_id"]: (m["entered"], m["left"]) for m in report.lore_movement()} == {
        "storm": (1, 0),
        "mira": (0, 1),
    }
    # Narrative queries keep their results: the horizon is the turn they were recorded at.
    assert all(not q.changed for q in report.queries if q.recorded.params.get("exclude_chunk_type") == "lore")


def test_replay_keeps_later_narrative_out(recorded_save, vector_memory):
    vector_memory.embed_chunks(
        recorded_save.save_id, [{"turn_id": 4, "text": "Mira lends Kaël money again, more money."}]
    )
    recorded_save.current_turn = 4
    recorded_save.save()
    report = replay_recorded_queries(game_save=recorded_save, turns=10)
    assert not report.changed


def test_replay_window_and_rewind(recorded_save):
    assert len(replay_recorded_queries(game_save=recorded_save, turns=1).queries) == 2  # turn 3 only
    CheckpointManager().rewind(recorded_save, 2)
    recorded_save.refresh_from_db()
    assert set(RecordedQuery.objects.values_list("turn_id", flat=True)) == {2}


def test_replay_page_full_and_fragment(client, author, recorded_save, vector_memory):
    LoreRevision.objects.create(
        universe=recorded_save.universe, entry_id="mira", action=LoreRevision.Action.UPDATE, author=author
    )
    edited = [dict(e) for e in LORE]
    edited[1]["text"] = "A quiet shop."
    edited[2]["text"] = "Money storms lend nothing to anyone."
    vector_memory.sync_lore(recorded_save.save_id, edited)
    client.force_login(author)
    url = reverse("memory:replay", args=[recorded_save.save_id])
    page = client.get(url).content.decode()
    assert "<html" in page and "4 recorded queries" in page and "<code>mira</code>" in page
    assert 'id="replay-summary"' not in page  # nothing runs until asked
    fragment = client.get(url, {"run": 1, "turns": 10}, HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith('<div id="replay-result">') and "<html" not in fragment
    assert "<strong>1</strong> of 4 queries changed" in fragment and "new top result" in fragment
    assert 'data-changed="yes"' in fragment and "lore:storm" in fragment


def test_replay_warns_while_the_lore_sync_is_pending(client, playtester, recorded_save):
    Job.objects.create(kind=JobKind.SYNC_LORE, game_save=recorded_save, status=JobStatus.QUEUED)
    client.force_login(playtester)
    page = client.get(reverse("memory:replay", args=[recorded_save.save_id])).content.decode()
    assert "lore re-sync is still queued or running" in page


def test_universe_replay_lists_saves_with_recorded_play(client, author, outsider, recorded_save):
    url = reverse("memory:universe_replay", args=[recorded_save.universe.slug])
    client.force_login(author)
    html = client.get(url).content.decode()
    row = html[html.index(f'data-save="{recorded_save.save_id}"') :]
    assert (
        reverse("memory:replay", args=[recorded_save.save_id]) in row
        and '<td class="num">4</td>' in row[: row.index("</tr>")]
    )
    client.force_login(outsider)
    assert client.get(url).status_code == 404


def test_a_lore_edit_in_the_studio_reaches_the_replay(
    recorded_save, author, settings, django_capture_on_commit_callbacks
):
    """Edit lore through the lore service; the sync jobs re-embed the save's lore; replay sees it."""
    from studio.world.models import LoreEntry
    from studio.universes.services import lore_entry_update

    settings.AXIOM_JOBS_EAGER = True
    settings.REDIS_URL = ""
    universe = recorded_save.universe
    for entry in LORE:
        LoreEntry.objects.update_or_create(
            universe=universe, entry_id=entry["entry_id"], defaults={"title": entry["title"], "text": entry["text"]}
        )
    LoreEntry.objects.filter(universe=universe).exclude(entry_id__in=[e["entry_id"] for e in LORE]).delete()
    storm = LoreEntry.objects.get(universe=universe, entry_id="storm")
    with django_capture_on_commit_callbacks(execute=True):
        lore_entry_update(entry=storm, user=author, text="Storms lend money to nobody; who lends money? Not the storm.")
        LoreEntry.objects.filter(universe=universe, entry_id="mira").update(text="A quiet shop.")
    assert Job.objects.filter(game_save=recorded_save, kind=JobKind.SYNC_LORE, status=JobStatus.DONE).exists()
    report = replay_recorded_queries(game_save=recorded_save)
    changed = {q.recorded.query_text: (q.before, q.after) for q in report.changed}
    assert changed == {"who lends money": (["lore:mira"], ["lore:storm"])}


def test_a_replay_run_reads_the_recorded_queries_and_the_sync_flag_once(client, author, recorded_save):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.force_login(author)
    with CaptureQueriesContext(connection) as queries:
        page = client.get(reverse("memory:replay", args=[recorded_save.save_id]), {"run": 1}).content.decode()
    assert "of 4 queries changed" in page
    sql = [q["sql"] for q in queries.captured_queries]
    assert sum(1 for s in sql if s.startswith("SELECT") and 'FROM "memory_recordedquery"' in s) == 1
    assert sum(1 for s in sql if 'FROM "memory_job"' in s) == 1
