"""Presence and reveals in the timeline registry (registered by `MemoryConfig.ready()`).

Presence rows never change once their turn is gone, so the table is plain: a rewind deletes
the rows after N, a fork copies those up to N, the save file's `presence` section carries
them. Reveals cite facts, so they run after the facts (order 35): a fork copies the reveals
up to N with each fact remapped to the fork's copy (`ForkContext.ids["facts"]`); a reveal of
a fact the fork does not have cannot exist (a fact is never newer than a reveal of it).
"""
from __future__ import annotations

from studio.memory import timeline, turn_rows
from studio.memory.knowledge.models import Presence, Reveal

COPIED = ("turn_id", "entry_id", "character", "told_by", "source", "created_at")


def copy_reveals(ctx: timeline.ForkContext) -> None:
    fact_ids = ctx.ids_of("facts")
    rows = []
    for row in Reveal.objects.filter(game_save_id=ctx.source.pk, turn_id__lte=ctx.target_turn).order_by("id"):
        if row.fact_id and row.fact_id not in fact_ids:
            continue
        rows.append(Reveal(game_save_id=ctx.fork.pk, fact_id=fact_ids.get(row.fact_id) if row.fact_id else None,
                           **{name: getattr(row, name) for name in COPIED}))
    Reveal.objects.bulk_create(rows, batch_size=1000)


TABLES = [
    timeline.TurnTable.plain("presence", Presence, order=25, section="presence", label="Presence records"),
    timeline.TurnTable(
        name="reveals",
        model=Reveal,
        rollback=lambda save, n: {"reveals": turn_rows.delete_after(Reveal, save.pk, n)},
        count=lambda save, n: {"reveals": turn_rows.count_after(Reveal, save.pk, n)},
        copy=copy_reveals,
        section="reveals",
        order=35,
        labels={"reveals": "Reveals"},
    ),
]


def register() -> None:
    for entry in TABLES:
        timeline.register_table(entry)
