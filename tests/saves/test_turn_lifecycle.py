"""A turn's whole lifecycle from one registration (issue 34): a throwaway per-turn model registered
with one line is appended with every turn, rolled back by a rewind, counted by its preview, forked
(every column) and carried by the save file, with no other code."""

from __future__ import annotations

import pytest
from django.db import connection, models
from django.test.utils import isolate_apps

from studio.memory import facts as F
from studio.memory import timeline
from studio.memory.models import Fact as FactRow
from studio.saves import portable
from studio.saves.checkpoints import CheckpointManager
from studio.world.models import Save
from studio.saves.services import turn_append

pytestmark = pytest.mark.django_db

MOODS = [("calm", "Calm"), ("grim", "Grim"), ("wild", "Wild")]


@pytest.fixture
def mood_model():
    """A model of no app's, its table made in the test's transaction (SQLite and PostgreSQL alike)."""
    with isolate_apps("studio.memory"):

        class MoodMark(models.Model):
            game_save = models.ForeignKey(Save, on_delete=models.CASCADE)
            turn_id = models.PositiveIntegerField()
            mood = models.CharField(max_length=8, choices=MOODS)
            note = models.TextField(blank=True)
            weight = models.IntegerField(null=True)
            loud = models.BooleanField(default=False)
            data = models.JSONField(default=dict)
            fact = models.ForeignKey(FactRow, null=True, on_delete=models.DO_NOTHING, db_constraint=False)
            created_at = models.DateTimeField(auto_now_add=True)

            class Meta:
                app_label = "memory"
                db_table = "test_lifecycle_moodmark"

        # The CREATE TABLE alone, in the test's transaction (a schema editor's context would refuse it on
        # SQLite); its foreign keys and indexes (deferred SQL) are not needed.
        editor = connection.schema_editor()
        editor.deferred_sql = []
        sql, params = editor.table_sql(MoodMark)
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
        yield MoodMark


def mark(MoodMark, turn: timeline.TurnAppend) -> None:
    state = turn.state or {}
    MoodMark.objects.create(
        game_save=turn.save,
        turn_id=turn.turn_id,
        mood=state.get("mood", "calm"),
        note=turn.narrative[:20],
        weight=state.get("weight"),
        loud="!" in turn.player_input,
        data={"turn": turn.turn_id, "tags": ["a", "b"]},
        fact_id=state.get("fact"),
    )


def columns(MoodMark, save) -> list[dict]:
    return list(MoodMark.objects.filter(game_save=save).order_by("turn_id").values(*timeline.row_columns(MoodMark)))


def test_one_registration_gives_append_rewind_preview_fork_and_save_file(mood_model, world, vector, request):
    MoodMark = mood_model
    # The one line:
    timeline.register_table(
        timeline.TurnTable.plain(
            "mood_marks",
            MoodMark,
            order=97,
            section="mood_marks",
            label="Mood marks",
            preview="mood mark",
            remaps={"fact_id": "facts"},
            append=lambda turn: mark(MoodMark, turn),
        )
    )  # noqa: E501
    request.addfinalizer(lambda: timeline.unregister_table("mood_marks"))

    save = Save.objects.create(universe=world, name="Moods", save_id="moods")
    turn_append(game_save=save, player_input="hello", narrative="The fog lifts.", state={"mood": "calm"})
    fact_id = F.insert_facts(save, 1, [F.Fact("Mira owns a lamp", entities=["Mira"])])[0]
    for n, (mood, weight) in enumerate((("grim", 3), ("wild", None), ("grim", -2)), start=2):
        turn_append(
            game_save=save,
            player_input="go!" if weight else "go",
            narrative=f"Turn {n} text.",
            state={"mood": mood, "weight": weight, "fact": fact_id},
        )
    # Append: every path's turn writes the row (the Console, the API, the proxy and the importers call turn_append).
    rows = columns(MoodMark, save)
    assert [(r["turn_id"], r["mood"], r["weight"], r["loud"], r["fact_id"]) for r in rows] == [
        (1, "calm", None, False, None),
        (2, "grim", 3, True, fact_id),
        (3, "wild", None, False, fact_id),
        (4, "grim", -2, True, fact_id),
    ]

    # Fork at 3: every column of the rows up to 3, the fact remapped to the fork's copy.
    fork = CheckpointManager(vector_memory=vector).fork(save, 3)
    fork_fact = FactRow.objects.get(game_save=fork).pk
    assert fork_fact != fact_id
    assert columns(MoodMark, fork) == [{**r, "fact_id": fork_fact if r["fact_id"] else None} for r in rows[:3]]

    # Save file: exported, imported into a new save, the same rows (its fact the new save's).
    data = portable.save_export(game_save=save).read()
    assert b'"mood_marks"' in data
    imported = portable.save_import(universe=world, data=data).game_save
    new_fact = FactRow.objects.get(game_save=imported).pk
    assert columns(MoodMark, imported) == [{**r, "fact_id": new_fact if r["fact_id"] else None} for r in rows]
    assert portable.save_export(game_save=imported).read() == data

    # The rewind preview counts and names the rows; the rewind deletes them and reports the same count.
    preview = CheckpointManager(vector_memory=vector).preview(save, 2)
    assert preview.counts["mood_marks"] == 2 and "2 mood marks" in preview.message
    assert timeline.count_labels()["mood_marks"] == "Mood marks"
    result = CheckpointManager(vector_memory=vector).rewind(save, 2)
    assert result.counts["mood_marks"] == 2
    assert columns(MoodMark, save) == rows[:2]
