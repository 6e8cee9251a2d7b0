"""Row helpers shared by the core sections: bulk inserts, file-id to pk maps, item readers."""

from __future__ import annotations

from datetime import timezone as dt_timezone
from typing import Any, Iterable, Iterator

from django.db import connection, models
from django.utils import timezone

from studio.memory.models import JobKind, JobStatus
from studio.saves.portable.registry import INVALID, CheckContext


EXPORTED_JOB_STATUSES = (JobStatus.DONE, JobStatus.FAILED, JobStatus.SKIPPED)
# Bookkeeping of the vector store, which is not in the file (it is rebuilt on import).
UNPORTABLE_JOB_KINDS = (JobKind.VECTOR_ROLLBACK, JobKind.FORK_VECTORS)
PORTABLE_JOB_KINDS = [k for k in JobKind.values if k not in UNPORTABLE_JOB_KINDS]
REDERIVE_MARKER = "rederive"  # payload key on the jobs an import queues for itself
BATCH = 1000


def iso(value) -> str | None:
    """Return a time as UTC ISO 8601 with microseconds and a Z (the file's one time format)."""
    if value is None:
        return None
    return value.astimezone(dt_timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def insert_rows(model, rows: Iterable[dict[str, Any]]) -> None:
    """INSERT rows ({attname: value}) with one executemany per batch; unnamed columns get
    their defaults (auto_now_add columns: now).

    Given times are stored as they are: the ORM's bulk_create would stamp `created_at` with
    the import time, and the file's times are part of the save (the timeline shows them, the
    spend guard counts LLM calls by them). It is also several times faster than bulk_create,
    whose per-field preparation dominated an import of 2,000 turns.
    """
    meta = model._meta
    fields = [f for f in meta.concrete_fields if not f.primary_key]
    now = timezone.now()
    defaults: dict[str, Any] = {}
    for f in fields:
        if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False):
            defaults[f.attname] = now
        else:
            defaults[f.attname] = f.get_default()  # the declared default, "" for text, else None

    def adapter(f):
        if isinstance(f, models.JSONField):
            return lambda value: f.get_db_prep_save(value, connection=connection)
        if isinstance(f, models.DateTimeField):
            return connection.ops.adapt_datetimefield_value
        return None  # text, integers, booleans and foreign keys go to the driver as they are

    plan = [(f.attname, adapter(f)) for f in fields]
    table = connection.ops.quote_name(meta.db_table)
    names = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    sql = f"INSERT INTO {table} ({names}) VALUES ({', '.join(['%s'] * len(fields))})"
    batch: list[list[Any]] = []
    with connection.cursor() as cursor:
        for row in rows:
            values = []
            for name, adapt in plan:
                value = row[name] if name in row else defaults[name]
                values.append(adapt(value) if adapt is not None else value)
            batch.append(values)
            if len(batch) >= BATCH:
                cursor.executemany(sql, batch)
                batch = []
        if batch:
            cursor.executemany(sql, batch)


def _new_pks(model, game_save, file_ids: list[int]) -> dict[int, int]:
    """Map the file ids of rows just inserted (in that order) to their new pks.

    The save is new, so its rows of `model` are exactly these, and pks grow in insertion
    order on both databases (one writer per save; a sequence or rowid only ever grows).
    """
    pks = list(model._base_manager.filter(game_save_id=game_save.pk).order_by("pk").values_list("pk", flat=True))
    if len(pks) != len(file_ids):
        raise RuntimeError(f"expected {len(file_ids)} new {model._meta.verbose_name_plural}, found {len(pks)}")
    return dict(zip(file_ids, pks))


def _items(ctx: CheckContext, items: list, where: str, spec: dict, *, optional=()) -> Iterator[tuple[str, dict]]:
    return ctx.records(items, where, spec, optional=optional)  # CheckContext.records: the one loop


def _complete_items(ctx: CheckContext, items: list, where: str, spec: dict, *, section: str) -> list[dict]:
    """The section's items that passed every field check; each item's file id is noted as seen."""
    ids = ctx.ids.setdefault(section, {})
    out = []
    for _loc, item in _items(ctx, items, where, spec):
        if "id" in item:
            ids[item["id"]] = True
        if len(item) == len(spec):
            out.append(item)
    return out


# A later section's copy of a turn's own text (a snapshot's input and proposal, a recorded query's
# text) is written as null: "the turn's", read back from the file's `turns` (`ctx.ids["turns"]`).
INPUT, NARRATIVE = 0, 1


def turn_texts(game_save) -> dict[int, tuple[str, str]]:
    """Return {turn: (player_input, narrative)} of the save's Event_Log (one query)."""
    from studio.world.models import Event

    return {
        turn: (player_input, narrative)
        for turn, player_input, narrative in Event.objects.filter(game_save_id=game_save.pk).values_list(
            "turn_id", "player_input", "narrative"
        )
    }


def as_turn_text(text: str, texts: dict, turn_id: int, which: int) -> str | None:
    """Return None when `text` is turn `turn_id`'s own input or narrative (`which`), else the text."""
    own = texts.get(turn_id)
    return None if text and own is not None and own[which] == text else text


def from_turn_text(ctx: CheckContext, value, loc: str, turn_id: int, which: int):
    """Return the text a section item holds: `value`, or for null turn `turn_id`'s own (a problem if none)."""
    if value is not None:
        return value
    own = ctx.ids.get("turns", {}).get(turn_id)
    if not isinstance(own, tuple):
        ctx.checker.add(loc, f"is null (the text of turn {turn_id}), but the file has no such turn")
        return INVALID
    return own[which]


def _readers(ctx: CheckContext):
    c = ctx.checker
    return {
        "int": lambda **kw: lambda v, loc: c.integer(v, loc, **kw),
        "text": lambda **kw: lambda v, loc: c.text(v, loc, **kw),
        "limited": lambda field: lambda v, loc: c.limited(v, loc, field),
        "bool": lambda: lambda v, loc: c.boolean(v, loc),
        "time": lambda: lambda v, loc: c.timestamp(v, loc),
        "object": lambda **kw: lambda v, loc: c.mapping(v, loc, **kw),
        "turn": lambda **kw: lambda v, loc: ctx.turn(v, loc, **kw),
    }


# -- turns -----------------------------------------------------------------------------------
