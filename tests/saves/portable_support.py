"""Helpers for the save-file tests: a save with every kind of row, and a count of every table.

`rich_save` plays a living save through the engine functions (facts, CREATE / UPDATE /
DELETE consolidations, mental-model refreshes with versions), rewinds it once (so the
timeline generation moved and a trail was cut), plays on, and adds what play leaves behind:
finished jobs (one failed, one skipped, one of a dead timeline), in-flight and vector-store
jobs (which the file leaves out), LLM calls (with and without a job) and recorded queries.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from django.apps import apps

from studio.memory.models import Job, JobKind, JobStatus, LLMCall, RecordedQuery
from studio.saves.checkpoints import CheckpointManager
from studio.world.models import Save

from .scenario import play_turn
from tests.fakes import FakeVectorMemory

T0 = datetime(2025, 3, 14, 9, 26, 53, 589793, tzinfo=timezone.utc)


def rich_save(universe, *, name: str = "Rich run") -> Save:
    save = Save.objects.create(
        universe=universe, name=name, memory_mode="living", meta={"belief_mission": "Remember debts.", "tone": "grim"}
    )
    vector = FakeVectorMemory()
    t1 = play_turn(
        save,
        facts=[("Kaël owes Mira ten crowns", ["Kaël", "Mira"]), ("The tide is high", [])],
        vector=vector,
        narrative="Kaël borrows from Mira as the tide rises.",
        actions=[
            {"kind": "CREATE", "statement": "Kaël is in debt", "subject": "Kaël", "source_fact_ids": [("new", 0)]},
            {"kind": "CREATE", "statement": "The harbour floods", "subject": "", "source_fact_ids": [("new", 1)]},
        ],
    )
    debt, flood = list(save.observations.order_by("id").values_list("id", flat=True))
    play_turn(
        save,
        facts=[("Kaël pays Mira five crowns", ["Kaël", "Mira"])],
        vector=vector,
        narrative="Kaël pays half.",
        actions=[
            {
                "kind": "UPDATE",
                "observation_id": debt,
                "statement": "Kaël repays his debt slowly",
                "subject": "Kaël",
                "source_fact_ids": [("new", 0), t1["fact_ids"][0]],
            }
        ],
        refresh=[("Kaël", "A smuggler in debt to Mira.", [debt])],
    )
    play_turn(
        save,
        facts=[("The tide recedes", [])],
        vector=vector,
        narrative="The water goes.",
        actions=[{"kind": "DELETE", "observation_id": flood}],
        refresh=[("Kaël", "A smuggler paying Mira back.", [debt, flood]), ("Mira", "A lender.", [debt])],
    )
    play_turn(
        save,
        facts=[("Mira forgives the rest", ["Mira"])],
        vector=vector,
        narrative="Mira forgives him.",
        actions=[
            {"kind": "CREATE", "statement": "Mira is generous", "subject": "Mira", "source_fact_ids": [("new", 0)]}
        ],
    )
    CheckpointManager(vector_memory=vector).rewind(save, 3)  # generation 1; turn 4's rows are gone
    save.refresh_from_db()
    play_turn(
        save,
        facts=[("Ivo arrives by boat", ["Ivo"])],
        vector=vector,
        actions=[
            {"kind": "CREATE", "statement": "Ivo is a stranger", "subject": "Ivo", "source_fact_ids": [("new", 0)]}
        ],
        narrative="Ivo arrives — «bonjour» 🚢",
    )
    save.refresh_from_db()
    common = {"universe_id": universe.pk, "game_save": save}
    done = Job.objects.create(
        kind=JobKind.LIVING_TURN,
        turn_id=4,
        timeline_generation=1,
        status=JobStatus.DONE,
        attempts=1,
        progress="done",
        result={"facts": 1, "timings": {"write_seconds": 0.0123}},
        llm_calls=2,
        llm_tokens=345,
        **common,
    )
    Job.objects.create(
        kind=JobKind.LIVING_TURN,
        turn_id=4,
        timeline_generation=0,
        status=JobStatus.DONE,
        attempts=1,
        progress="done",
        **common,
    )  # the dead timeline's turn 4
    Job.objects.create(
        kind=JobKind.EMBED_TURN,
        turn_id=2,
        timeline_generation=0,
        status=JobStatus.FAILED,
        attempts=3,
        progress="failed",
        error="ConnectionError: vector store unreachable",
        **common,
    )
    Job.objects.create(
        kind=JobKind.REFRESH_MODELS,
        turn_id=3,
        timeline_generation=1,
        status=JobStatus.SKIPPED,
        progress="skipped: no LLM configured",
        **common,
    )
    Job.objects.create(kind=JobKind.EMBED_TURN, turn_id=4, timeline_generation=1, status=JobStatus.QUEUED, **common)
    LLMCall.objects.create(
        game_save=save,
        job=done,
        operation="extract",
        model="m",
        prompt_tokens=200,
        completion_tokens=45,
        latency_ms=812,
    )
    LLMCall.objects.create(
        game_save=save,
        job=None,
        operation="reflect",
        model="m",
        prompt_tokens=90,
        completion_tokens=10,
        latency_ms=301,
        error="timeout",
    )
    LLMCall.objects.filter(game_save=save).update(created_at=T0)
    RecordedQuery.objects.create(
        game_save=save,
        turn_id=2,
        query_text="who owes whom",
        params={"k": 5, "labels": {"lore:kael": "Kaël is a smuggler."}},
        result_ids=["lore:kael", "chunk:c3"],
    )
    Save.objects.filter(pk=save.pk).update(last_activity_at=T0 + timedelta(hours=1))
    save.refresh_from_db()
    return save


def table_counts() -> dict[str, int]:
    """Rows in every table of the studio's apps (an import that fails must change none)."""
    return {
        model._meta.label: model._default_manager.count()
        if model._meta.label != "memory.Observation"
        else model.all_objects.count()
        for app in ("saves", "memory", "universes", "api")
        for model in apps.get_app_config(app).get_models()
    }
