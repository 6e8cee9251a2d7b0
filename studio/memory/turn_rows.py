"""Set-based helpers for rows keyed by save and turn: bounded reads, rollback, fork copies.

The storage modules (`facts`, `observations`, `mental_models`) and the timeline registry
(`studio.memory.timeline`) share these instead of each typing its own loop:

- `bounded_read`: a save's rows up to a turn, newest first, at most `limit` of them (the
  `get_*` functions of the engine API). A `limit` of 0 or less reads nothing.
- `RowRollback`: how the rows of one kind roll back to turn N. Rows created after N are
  deleted; the survivors that changed after N (`changed`) are given back their fields as
  they stood at N (`restore`) and written in one set-based UPDATE (`update_rows`). Facts
  have no `changed` rule (a fact never changes), beliefs rebuild from their history trail,
  mental models from their versions.
- `delete_after` / `count_after` / `copy_turn_rows`: the rows of a plain per-turn table
  after N (rewind, its preview) and up to N (fork).
- `upsert_turn_row`: write a turn's one row of a kind, replacing the row already there, in one
  statement (`update_or_create` takes six: two savepoints, a locking read, the write).
- `turns_q`: a filter on a set of turns that reads runs of consecutive turns by their bounds (a
  list of 2,000 turns compiled 2,000 parameters per query; the same rows either way).

Every function runs in the caller's transaction unless it says otherwise; none commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from django.db import connection, transaction
from django.db.models import Q, QuerySet

from studio.memory.models import subject_key_for

__all__ = [
    "save_pk_for",
    "bounded_read",
    "RowRollback",
    "update_rows",
    "delete_after",
    "count_after",
    "copy_turn_rows",
    "insert_values",
    "upsert_turn_row",
    "turns_q",
    "consecutive_runs",
]


def save_pk_for(save_id) -> int:
    """Return the `save_pk` (the Save row's integer key) of the save named by `save_id` (a public id or a `Save`).

    Raise `Save.DoesNotExist` for an unknown id: writing memory for a save that does not
    exist is a caller bug, not something to paper over.
    """
    from studio.world.models import Save

    if isinstance(save_id, Save):
        return save_id.pk
    return Save.objects.values_list("pk", flat=True).get(save_id=save_id)


def bounded_read(
    queryset: QuerySet,
    *,
    turn_field: str,
    max_turn_id: int | None,
    order_by: tuple[str, ...],
    limit: int | None,
    subject: str | None = None,
    convert: Callable[[Any], Any] = lambda row: row,
) -> list:
    """Return `convert(row)` for the rows of `queryset` at turns <= `max_turn_id`, in order.

    `turn_field` is the column the horizon applies to (`turn_id` for facts,
    `created_turn_id` for beliefs and mental models); None means no bound. `subject` keeps
    the rows whose `subject_key` matches it case-insensitively ("" is the world); None keeps
    every subject. `limit` caps the rows (None: no cap; 0 or less: no rows, without a query).
    """
    if limit is not None and limit <= 0:
        return []
    if max_turn_id is not None:
        queryset = queryset.filter(**{f"{turn_field}__lte": max_turn_id})
    if subject is not None:
        queryset = queryset.filter(subject_key=subject_key_for(subject))
    queryset = queryset.order_by(*order_by)
    if limit is not None:
        queryset = queryset[:limit]
    return [convert(row) for row in queryset]


@dataclass(frozen=True)
class RowRollback:
    """How the rows of one model roll back to turn N.

    `created_field` dates a row: rows created after N are deleted. `changed(n)` is the Q of
    the survivors that changed after N (None: rows never change, so only deletes happen);
    `restore(**columns, target_turn_id=n)` returns the fields such a row had at N, derived
    columns included (the write bypasses `save()`), and `write_fields` names them.
    `restore_from` names the row's columns passed to `restore` as keyword arguments: a
    rollback loads those and the id, nothing else (`read_fields`). `manager` names the
    model's manager that sees every row (beliefs: `all_objects`, with the retired ones).
    """

    model: type
    created_field: str
    changed: Callable[[int], Q] | None = None
    restore: Callable[..., dict[str, Any]] | None = None
    restore_from: tuple[str, ...] = ()
    write_fields: tuple[str, ...] = ()
    manager: str = "objects"

    @property
    def read_fields(self) -> tuple[str, ...]:
        """The columns a rollback loads for a changed row: its id and what `restore` reads."""
        return ("id", *self.restore_from)

    def split(self, save_pk: int, target_turn_id: int) -> tuple[QuerySet, QuerySet]:
        """Return (rows created after the target, survivors changed after it) as querysets."""
        base = getattr(self.model, self.manager).filter(game_save_id=save_pk)
        doomed = base.filter(**{f"{self.created_field}__gt": target_turn_id})
        if self.changed is None:
            return doomed, base.none()
        changed = base.filter(**{f"{self.created_field}__lte": target_turn_id}).filter(self.changed(target_turn_id))
        return doomed, changed

    def values_at(self, row, target_turn_id: int) -> dict[str, Any]:
        """Return the fields `row` had at turn `target_turn_id` (as a rewind leaves them)."""
        if self.restore is None:
            raise TypeError(f"{self.model.__name__} rows never change: they have no earlier values")
        return self.restore(**{name: getattr(row, name) for name in self.restore_from}, target_turn_id=target_turn_id)

    def roll_back(self, save_pk: int, target_turn_id: int) -> dict[str, int]:
        """Roll the save's rows back to `target_turn_id` in the caller's transaction.

        Return {"deleted": n, "updated": m}.
        """
        n = int(target_turn_id)
        doomed, changed = self.split(save_pk, n)
        deleted, _ = doomed.delete()
        if self.changed is None:
            return {"deleted": deleted, "updated": 0}
        rows = list(changed.only(*self.read_fields))
        for row in rows:
            for name, value in self.values_at(row, n).items():
                setattr(row, name, value)
        update_rows(self.model, rows, list(self.write_fields))
        return {"deleted": deleted, "updated": len(rows)}

    def roll_back_save(self, save_id, target_turn_id: int) -> dict[str, int]:
        """`roll_back` for a save named by its public id (or a `Save`), atomically.

        A savepoint inside the caller's transaction (a transaction of its own when the
        caller has none), so a failure never leaves the rows half rolled back.
        """
        with transaction.atomic():
            return self.roll_back(save_pk_for(save_id), target_turn_id)


def update_rows(model, rows, field_names: list[str]) -> None:
    """Write `field_names` of `rows` in as few statements as the database allows.

    PostgreSQL: one `UPDATE ... FROM (VALUES ...)` per 1,000 rows. Elsewhere (SQLite): one
    prepared `UPDATE ... WHERE id = %s` run through `executemany`, a single C-level loop.
    Django's `bulk_update` would build a CASE WHEN expression per row and field in Python,
    which costs most of a second for a thousand beliefs. Values go through each field's
    `get_db_prep_value`, so JSON columns are adapted as Django would.
    """
    if not rows:
        return
    meta = model._meta
    qn = connection.ops.quote_name
    fields = [meta.get_field(name) for name in field_names]
    table, pk_column = qn(meta.db_table), qn(meta.pk.column)
    params = [
        [row.pk] + [f.get_db_prep_value(getattr(row, f.attname), connection, prepared=False) for f in fields]
        for row in rows
    ]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            casts = [meta.pk.db_type(connection)] + [f.db_type(connection) for f in fields]
            placeholder = "(" + ", ".join(f"%s::{cast}" for cast in casts) + ")"
            names = ", ".join(["id"] + [f"v{i}" for i in range(len(fields))])
            assignments = ", ".join(f"{qn(f.column)} = v.v{i}" for i, f in enumerate(fields))
            for start in range(0, len(params), 1000):
                batch = params[start : start + 1000]
                cursor.execute(
                    f"UPDATE {table} AS t SET {assignments} "
                    f"FROM (VALUES {', '.join([placeholder] * len(batch))}) AS v({names}) "
                    f"WHERE t.{pk_column} = v.id",
                    [value for row in batch for value in row],
                )
        else:
            assignments = ", ".join(f"{qn(f.column)} = %s" for f in fields)
            cursor.executemany(
                f"UPDATE {table} SET {assignments} WHERE {pk_column} = %s",
                [row[1:] + row[:1] for row in params],
            )


def delete_after(model, save_pk: int, target_turn_id: int, *, turn_field: str = "turn_id") -> int:
    """Delete the save's rows of `model` at turns after `target_turn_id`; return how many."""
    deleted, _ = model.objects.filter(game_save_id=save_pk, **{f"{turn_field}__gt": target_turn_id}).delete()
    return deleted


def count_after(model, save_pk: int, target_turn_id: int, *, turn_field: str = "turn_id") -> int:
    """Return how many of the save's rows of `model` lie at turns after `target_turn_id`."""
    return model.objects.filter(game_save_id=save_pk, **{f"{turn_field}__gt": target_turn_id}).count()


def copy_turn_rows(
    model, source_pk: int, fork_pk: int, n: int, *, columns: list[str] | None = None, turn_field: str = "turn_id"
) -> None:
    """INSERT ... SELECT the rows of `model` up to turn `n` (`turn_field`) into the fork (one statement).

    `columns` defaults to every concrete column but the id and the save, so the copy is the
    row as it stands (its `created_at` too).
    """
    meta = model._meta
    if columns is None:
        columns = [f.name for f in meta.concrete_fields if not f.primary_key and f.name != "game_save"]
    qn = connection.ops.quote_name
    table = qn(meta.db_table)
    cols = [qn(meta.get_field(c).column) for c in columns]
    save_col = qn(meta.get_field("game_save").column)
    turn_col = qn(meta.get_field(turn_field).column)
    sql = (
        f"INSERT INTO {table} ({save_col}, {', '.join(cols)}) "
        f"SELECT %s, {', '.join(cols)} FROM {table} WHERE {save_col} = %s AND {turn_col} <= %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [fork_pk, source_pk, n])


def insert_values(model, rows: list[dict[str, Any]], *, batch: int = 1000) -> None:
    """INSERT `rows` ({attname: value}, every concrete column but the id) as they are, times
    included (`bulk_create` would stamp `auto_now_add` columns with the present)."""
    if not rows:
        return
    meta = model._meta
    fields = [f for f in meta.concrete_fields if not f.primary_key]
    qn = connection.ops.quote_name
    sql = (
        f"INSERT INTO {qn(meta.db_table)} ({', '.join(qn(f.column) for f in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))})"
    )
    params = [[f.get_db_prep_save(row[f.attname], connection=connection) for f in fields] for row in rows]
    with connection.cursor() as cursor:
        for start in range(0, len(params), batch):
            cursor.executemany(sql, params[start : start + batch])


def upsert_turn_row(model, *, save_pk: int, turn_id: int, values: dict[str, Any]):
    """Write the row of (`save_pk`, `turn_id`) with `values`, replacing the one there; return it.

    One INSERT ... ON CONFLICT DO UPDATE on the model's unique (game_save, turn_id): the row keeps its
    id and `created_at`, and is written whole otherwise. No signals are sent (none is connected to
    the per-turn tables).
    """
    row = model(game_save_id=save_pk, turn_id=turn_id, **values)
    (row,) = model.objects.bulk_create(
        [row], update_conflicts=True, unique_fields=["game_save", "turn_id"], update_fields=list(values)
    )
    return row


def consecutive_runs(turns) -> list[tuple[int, int]]:
    """Sorted turn ids as (first, last) runs of consecutive ids: [3, 4, 5, 9] -> [(3, 5), (9, 9)]."""
    runs: list[list[int]] = []
    for turn in turns:
        if runs and turn == runs[-1][1] + 1:
            runs[-1][1] = turn
        else:
            runs.append([turn, turn])
    return [(first, last) for first, last in runs]


RUN = 16  # a run of this many consecutive turns is read by its bounds, not as that many parameters


def turns_q(turns, field: str = "turn_id") -> Q:
    """A filter on `field` for these turn numbers: runs of at least `RUN` consecutive turns by their bounds
    (`consecutive_runs`), the rest by one list (the same rows as `field__in=turns`; none for no turns)."""
    parts, single = [], []
    for first, last in consecutive_runs(sorted({int(t) for t in turns})):
        if last - first + 1 >= RUN:
            parts.append(Q(**{f"{field}__gte": first, f"{field}__lte": last}))
        else:
            single += range(first, last + 1)
    if single:
        parts.append(Q(**{f"{field}__in": single}))
    if not parts:
        return Q(**{f"{field}__in": []})  # matches nothing: the query is not even sent
    q = parts[0]
    for part in parts[1:]:
        q |= part
    return q
