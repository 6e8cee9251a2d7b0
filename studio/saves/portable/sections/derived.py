"""The save-file section of a per-turn table with no hand-written section: derived from its columns.

A table registered in the timeline registry (`studio.memory.timeline`) names its save-file
section; when no `SaveSection` of that name is registered, the save file carries the table
through this one: one item per row, in turn order, every column a fork copies
(`timeline.row_columns`: all but the id and the save), times as the file's ISO 8601 UTC, a
column that holds another table's id (a `remaps` entry naming a table) as that table's file
id. `check` reads each column by its field (a whole number, a text within the field's
`max_length`, one of its choices, a boolean, a time, any JSON value; nullable when the
field is), the turn column as a turn of the file; `load` inserts the rows as they are.
Optional: a studio without the table imports the file without it. A table whose remaps are
functions needs a hand-written section (`register_section`).
"""

from __future__ import annotations

from typing import Iterator

from django.db import models

from studio.memory import timeline
from studio.saves.portable.registry import INVALID, CheckContext, ExportContext, ImportContext, SaveSection
from studio.saves.portable.sections.rows import BATCH, insert_rows, iso

__all__ = ["derived_section"]


def _turn_field(entry: timeline.TurnTable) -> str:
    return getattr(entry.copy, "turn_field", None) or "turn_id"


def _reader(f: models.Field, ctx: CheckContext, turn_field: str, remap: str | None):
    c = ctx.checker

    def nullable(read):
        return (lambda v, loc: None if v is None else read(v, loc)) if f.null else read

    if remap is not None:
        return nullable(lambda v, loc: ctx.reference(v, loc, remap, what=remap.rstrip("s")))
    if f.attname == turn_field:
        return nullable(lambda v, loc: ctx.turn(v, loc))
    if f.choices:
        return nullable(lambda v, loc: c.choice(v, loc, [str(value) for value, _label in f.flatchoices]))
    if isinstance(f, models.BooleanField):
        return nullable(lambda v, loc: c.boolean(v, loc))
    if isinstance(f, (models.IntegerField, models.ForeignKey)):
        minimum = 0 if isinstance(f, (models.PositiveIntegerField, models.PositiveSmallIntegerField)) else -(2**31)
        return nullable(lambda v, loc: c.integer(v, loc, minimum=minimum))
    if isinstance(f, models.DateTimeField):
        return nullable(lambda v, loc: c.timestamp(v, loc))
    if isinstance(f, (models.CharField, models.TextField)):
        return nullable(lambda v, loc: c.text(v, loc, max_length=f.max_length))
    if isinstance(f, models.JSONField):
        return lambda v, loc: v
    raise TypeError(f"{f.model.__name__}.{f.name}: a derived save-file section cannot read a {type(f).__name__}")


def derived_section(entry: timeline.TurnTable, order: int | None = None) -> SaveSection:
    """Return the save-file section of `entry` (`entry.section`), derived from its model's columns."""
    model = entry.model
    remaps = dict(getattr(entry.copy, "remaps", None) or {})
    if any(not isinstance(how, str) for how in remaps.values()):
        raise TypeError(f"timeline table {entry.name!r} remaps through a function: register a section for it")
    turn_field = _turn_field(entry)
    columns = timeline.row_columns(model)
    fields = [
        model._meta.get_field(name)
        if name in {f.name for f in model._meta.concrete_fields}
        else next(f for f in model._meta.concrete_fields if f.attname == name)
        for name in columns
    ]

    def export(ctx: ExportContext) -> Iterator[dict]:
        rows = model._base_manager.filter(game_save_id=ctx.game_save.pk).order_by(turn_field, "pk")
        for row in rows.values(*columns).iterator(chunk_size=BATCH):
            item = {}
            for f in fields:
                value = row[f.attname]
                if f.attname in remaps and value is not None:
                    value = ctx.file_ids.get(remaps[f.attname], {}).get(value)
                    if value is None:
                        break  # it cites a row the file does not carry (as a fork leaves it out)
                item[f.attname] = iso(value) if isinstance(f, models.DateTimeField) else value
            else:
                yield item

    def check(items: list, ctx: CheckContext, where: str) -> list[dict]:
        spec = {f.attname: _reader(f, ctx, turn_field, remaps.get(f.attname)) for f in fields}
        return [item for _loc, item in ctx.complete_records(items, where, spec) if INVALID not in item.values()]

    def load(items: list[dict], ctx: ImportContext) -> int:
        def row(item):
            out = {"game_save_id": ctx.game_save.pk, **item}
            for column, table in remaps.items():
                if out.get(column) is not None:
                    out[column] = ctx.db_ids[table][out[column]]
            return out

        insert_rows(model, (row(item) for item in items))
        return len(items)

    return SaveSection(
        entry.section, 1, export, check, load, order=entry.order if order is None else order, optional=True
    )
