"""The engine's per-turn tables in the timeline registry, registered by `MemoryConfig.ready()`.

Facts (deleted after N), beliefs (rebuilt from their history trail, `observations`), mental
models (rebuilt from their versions, `mental_models`), recorded queries and lore activation
rows (deleted after N). A fork copies facts, beliefs and mental models as they stood at N
with new ids (beliefs' sources remapped to the fork's facts, mental models' sources to the
fork's beliefs) and the lore activation rows up to N (every column). Appending a turn records
its lore activation (what activated, the sticky and cooldown windows it left). Facts, beliefs
and mental models are what a turn's extraction derives (`living`: re-extracting the last turn
rolls them back); a rewind that changed beliefs or mental models redoes the running living
jobs that read them (`read_by_jobs`), and one that rolled back mental models of a living save
queues their refresh (`rewound`), as a living fork with stale mental models does (`forked`). The job ledger is declared exempt.
"""

from __future__ import annotations

from studio.memory import timeline, turn_rows
from studio.memory.facts import FACT_ROLLBACK
from studio.memory.lore.activation_state import lore_activation_record_turn
from studio.memory.mental_models import MODEL_ROLLBACK
from studio.memory.models import Fact as FactRow
from studio.memory.models import Job, LoreActivation, RecordedQuery
from studio.memory.models import MentalModel as MentalModelRow
from studio.memory.models import Observation as ObservationRow
from studio.memory.rewind_details import belief_details, model_details
from studio.memory.observations import BELIEF_ROLLBACK, SOURCES_GONE, belief_retire, trail_is_exact


def copy_facts(source_pk: int, fork_pk: int, n: int) -> dict[int, int]:
    """Copy the facts up to turn `n` into the fork; return {source fact id: fork fact id}."""
    rows = list(FactRow.objects.filter(game_save_id=source_pk, turn_id__lte=n).order_by("id"))
    old_ids = [r.pk for r in rows]
    for r in rows:
        r.pk = None
        r.id = None
        r.game_save_id = fork_pk
    created = FactRow.objects.bulk_create(rows, batch_size=2000)
    return {old: new.pk for old, new in zip(old_ids, created)}


def copy_beliefs(source_pk: int, fork_pk: int, n: int, fact_ids: dict[int, int]) -> dict[int, int]:
    """Copy the beliefs as they stood at turn `n` (sources remapped); return their id map."""

    def remap(sources):
        return [
            {**s, "fact_id": fact_ids[int(s["fact_id"])]}
            for s in sources or []
            if int(s.get("fact_id", -1)) in fact_ids
        ]

    rows = list(ObservationRow.all_objects.filter(game_save_id=source_pk, created_turn_id__lte=n).order_by("id"))
    old_ids = [r.pk for r in rows]
    for r in rows:
        if r.updated_turn_id > n or r.last_source_turn > n:
            for name, value in BELIEF_ROLLBACK.values_at(r, n).items():
                setattr(r, name, value)
        held_sources = r.deleted_turn_id is None and bool(r.sources) and trail_is_exact(r.history)
        r.sources = remap(r.sources)
        if held_sources and not r.sources:  # every source was deleted by an edit: retired, as a rewind to n does
            belief_retire(r, n, SOURCES_GONE)
        r.history = [
            {**h, "sources_added": remap(h["sources_added"])} if "sources_added" in h else dict(h)
            for h in r.history or []
        ]
        r.proof_count = len(r.sources)
        r.pk = None
        r.id = None
        r.game_save_id = fork_pk
    created = ObservationRow.all_objects.bulk_create(rows, batch_size=1000)
    return {old: new.pk for old, new in zip(old_ids, created)}


def copy_models(source_pk: int, fork_pk: int, n: int, belief_ids: dict[int, int]) -> None:
    """Copy the mental models as they stood at turn `n` (belief sources remapped)."""

    def remap(ids):
        return [belief_ids[int(i)] for i in ids or [] if int(i) in belief_ids]

    rows = list(MentalModelRow.objects.filter(game_save_id=source_pk, created_turn_id__lte=n).order_by("id"))
    for r in rows:
        if r.updated_turn_id > n:
            for name, value in MODEL_ROLLBACK.values_at(r, n).items():
                setattr(r, name, value)
        r.sources = remap(r.sources)
        r.versions = [{**v, "sources": remap(v.get("sources"))} for v in r.versions or []]
        r.pk = None
        r.id = None
        r.game_save_id = fork_pk
    MentalModelRow.objects.bulk_create(rows)


def _rolled(rule: turn_rows.RowRollback, prefix: str, labels: tuple[str, str], what: str):
    """rollback / count functions of a table that deletes some rows and rolls others back."""

    def rollback(save, n: int) -> dict[str, int]:
        done = rule.roll_back(save.pk, n)
        return {f"{prefix}_deleted": done["deleted"], f"{prefix}_updated": done["updated"]}

    def count(save, n: int) -> dict[str, int]:
        doomed, changed = rule.split(save.pk, n)
        return {f"{prefix}_deleted": doomed.count(), f"{prefix}_updated": changed.count()}

    return {
        "rollback": rollback,
        "count": count,
        "labels": {f"{prefix}_deleted": labels[0], f"{prefix}_updated": labels[1]},
        "preview": {f"{prefix}_deleted": (what, "deletes"), f"{prefix}_updated": (what, "rolls back")},
    }


def refresh_rolled_back_models(save, n: int, counts: dict[str, int]) -> None:
    """Regenerate the rewound (stale) profiles from the rewound beliefs, on the new timeline."""
    if counts.get("mental_models_updated") and save.is_living:
        from studio.memory import jobs

        jobs.enqueue_refresh_models(game_save=save)


def refresh_forked_models(ctx: timeline.ForkContext) -> None:
    """A living fork whose copied mental models are stale (rolled back to N, or never refreshed by
    the source) gets its own refresh, as a rewind to N would."""
    if ctx.fork.is_living and MentalModelRow.objects.filter(game_save_id=ctx.fork.pk, stale=True).exists():
        from studio.memory import jobs

        jobs.enqueue_refresh_models(game_save=ctx.fork)


def append_lore_activation(turn: timeline.TurnAppend) -> None:
    lore_activation_record_turn(save=turn.save, turn_id=turn.turn_id, player_input=turn.player_input or "")


def _copy_facts(ctx: timeline.ForkContext) -> None:
    ctx.ids["facts"] = copy_facts(ctx.source.pk, ctx.fork.pk, ctx.target_turn)


def _copy_beliefs(ctx: timeline.ForkContext) -> None:
    ctx.ids["beliefs"] = copy_beliefs(ctx.source.pk, ctx.fork.pk, ctx.target_turn, ctx.ids_of("facts"))


def _copy_models(ctx: timeline.ForkContext) -> None:
    copy_models(ctx.source.pk, ctx.fork.pk, ctx.target_turn, ctx.ids_of("beliefs"))


TABLES = [
    timeline.TurnTable(
        name="facts",
        model=FactRow,
        rollback=lambda save, n: {"facts": FACT_ROLLBACK.roll_back(save.pk, n)["deleted"]},
        count=lambda save, n: {"facts": FACT_ROLLBACK.split(save.pk, n)[0].count()},
        copy=_copy_facts,
        section="facts",
        order=30,
        labels={"facts": "Facts"},
        preview={"facts": ("fact", "deletes")},
        living=True,
    ),
    timeline.TurnTable(
        name="beliefs",
        model=ObservationRow,
        copy=_copy_beliefs,
        section="beliefs",
        order=40,
        living=True,
        read_by_jobs=True,
        details=belief_details,
        **_rolled(BELIEF_ROLLBACK, "beliefs", ("Beliefs deleted", "Beliefs rolled back"), "belief"),
    ),
    timeline.TurnTable(
        name="mental_models",
        model=MentalModelRow,
        copy=_copy_models,
        section="mental_models",
        order=50,
        living=True,
        read_by_jobs=True,
        rewound=refresh_rolled_back_models,
        forked=refresh_forked_models,
        details=model_details,
        **_rolled(
            MODEL_ROLLBACK, "mental_models", ("Mental models deleted", "Mental models rolled back"), "mental model"
        ),
    ),
    timeline.TurnTable.plain(
        "recorded_queries",
        RecordedQuery,
        order=60,
        section="recorded_queries",
        label="Recorded queries",
        copied=False,
        note="Queries recorded for lore-edit replay belong to the play that made them: a fork records its own.",
    ),
    timeline.TurnTable.plain(
        "lore_activations",
        LoreActivation,
        order=70,
        section="lore_activation",
        label="Lore activation records",
        append=append_lore_activation,
    ),
]


def register() -> None:
    """Register the engine's per-turn tables, and declare the job ledger exempt."""
    for entry in TABLES:
        timeline.register_table(entry)
    timeline.exempt_model(
        Job,
        reason=(
            "the job ledger keeps every job's outcome: a rewind moves the save's timeline generation, "
            "so a job queued for a dropped turn writes nothing; the save file exports finished jobs "
            "in its own `jobs` section"
        ),
    )
