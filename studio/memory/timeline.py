"""The timeline registry: every table keyed by save and turn, and what a rewind does to it.

A save's timeline is spread over many tables (the Event_Log, the state cache, facts,
beliefs, mental models, lore activations, narrator snapshots, ...). Rewind, its preview,
fork and the demo's trim must treat every one of them, so none walks a list of its own:
each app registers its per-turn tables here at start-up (`AppConfig.ready()`), and they
loop over the registry::

    # myapp/apps.py
    class MyAppConfig(AppConfig):
        def ready(self):
            from studio.memory import timeline
            from myapp.models import Presence

            timeline.register_table(timeline.TurnTable.plain(
                "presence", Presence, order=25, section="presence", label="Presence records",
            ))

A `TurnTable` says, for its model:
- `rollback(save, n)`: make the rows as they stood at turn N (delete the later ones, roll
  changed ones back), inside the caller's transaction; return counts by name;
- `count(save, n)`: the same counts without changing anything (the rewind preview), so a
  preview and the rewind that follows it report the same numbers;
- `copy(ctx)`: copy the rows as they stood at N into a fork (`ForkContext`), or None when a
  fork starts without them (say why in `note`);
- `section`: the save-file section that carries the rows (`studio.saves.portable`), or None
  when a save file leaves them out (say why in `note`). The engine does not import the
  save file: the name is checked against the section registry by the saves app's tests.

Tables run in `order` (then name): rewind deletes and fork copies in that order, so every
rewind takes its row locks in one order, and a fork copies a table after the tables whose
ids it remaps (`ForkContext.ids`). A model with a turn column that is not per-turn state
(the Save itself, the job ledger) is declared with `exempt_model(model, reason=...)`;
`unregistered_models()` lists the models that look per-turn (a `turn_id` or `*_turn` /
`*_turn_id` column, or a foreign key to a registered table) and are neither, and a test
keeps that list empty.

The registry only holds functions; it imports no app. The loops (`roll_back`,
`count_rollback`, `copy_up_to`) run inside the caller's transaction and never commit.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from studio.memory import turn_rows

__all__ = [
    "ForkContext",
    "TurnTable",
    "register_table",
    "unregister_table",
    "registered_tables",
    "table",
    "exempt_model",
    "exempt_models",
    "unregistered_models",
    "count_labels",
    "roll_back",
    "count_rollback",
    "copy_up_to",
]

TABLE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
# turn_id, created_turn_id, first_turn, last_turn, ...: a column that places a row on the timeline.
TURN_COLUMN = re.compile(r"(^|_)turn(_id)?$")


@dataclass
class ForkContext:
    """What a table's `copy` sees: the source save (locked), the new fork and `target_turn`.

    `ids[name]` maps the pks of a table's source rows to the fork's new pks, for the tables
    after it (beliefs cite facts, mental models cite beliefs); a table that remaps ids
    fills its own entry.
    """

    source: Any
    fork: Any
    target_turn: int
    ids: dict[str, dict[int, int]] = field(default_factory=dict)

    def ids_of(self, name: str) -> dict[int, int]:
        """Return the id map of table `name`; raise LookupError if it has not been copied yet."""
        try:
            return self.ids[name]
        except KeyError:
            raise LookupError(
                f"the fork has not copied {name!r} yet: register the table that needs its ids with a later order"
            ) from None


@dataclass(frozen=True)
class TurnTable:
    """One table keyed by save and turn, and how the timeline operations treat it."""

    name: str
    model: type
    rollback: Callable[[Any, int], dict[str, int]]
    count: Callable[[Any, int], dict[str, int]]
    copy: Callable[[ForkContext], Any] | None
    section: str | None
    order: int = 100
    labels: dict[str, str] = field(default_factory=dict)
    note: str = ""

    def __post_init__(self):
        if not TABLE_NAME.match(self.name):
            raise ValueError(f"a timeline table name is lower-case letters, digits and _: {self.name!r}")
        if (self.copy is None or self.section is None) and not self.note.strip():
            raise ValueError(
                f"timeline table {self.name!r} is not copied to a fork or not in the save file: say why in `note`"
            )

    @classmethod
    def plain(
        cls,
        name: str,
        model: type,
        *,
        order: int,
        section: str | None,
        label: str = "",
        counted: bool = True,
        copied: bool = True,
        note: str = "",
    ) -> "TurnTable":
        """A table of rows that never change, one `turn_id` each: a rewind deletes the rows
        after N, a fork copies every column of the rows up to N in one INSERT ... SELECT.

        `counted=False` keeps the table out of the rewind's counts (it still rolls back);
        `copied=False` leaves its rows out of a fork.
        """

        def rollback(save, n: int) -> dict[str, int]:
            deleted = turn_rows.delete_after(model, save.pk, n)
            return {name: deleted} if counted else {}

        def count(save, n: int) -> dict[str, int]:
            return {name: turn_rows.count_after(model, save.pk, n)} if counted else {}

        def copy(ctx: ForkContext) -> None:
            turn_rows.copy_turn_rows(model, ctx.source.pk, ctx.fork.pk, ctx.target_turn)

        return cls(
            name=name,
            model=model,
            rollback=rollback,
            count=count,
            copy=copy if copied else None,
            section=section,
            order=order,
            labels={name: label} if counted and label else {},
            note=note,
        )


_TABLES: dict[str, TurnTable] = {}
_EXEMPT: dict[type, str] = {}


def register_table(entry: TurnTable, *, replace: bool = False) -> TurnTable:
    """Add `entry` to every rewind, preview, fork and demo trim from now on; return it.

    A second table under a taken name, or a second registration of one model, raises
    ValueError unless `replace` (meant for tests) is set.
    """
    if not replace:
        taken = _TABLES.get(entry.name)
        if taken is not None and taken != entry:
            raise ValueError(f"a timeline table named {entry.name!r} is already registered")
        for other in _TABLES.values():
            if other.model is entry.model and other.name != entry.name:
                raise ValueError(f"{entry.model.__name__} is already registered as timeline table {other.name!r}")
    _TABLES[entry.name] = entry
    return entry


def unregister_table(name: str) -> None:
    """Remove a table (tests); unknown names are ignored."""
    _TABLES.pop(name, None)


def registered_tables() -> list[TurnTable]:
    """Return the registered tables in the order a rewind and a fork treat them."""
    return sorted(_TABLES.values(), key=lambda t: (t.order, t.name))


def table(name: str) -> TurnTable:
    """Return the registered table `name` (KeyError names the registered ones)."""
    try:
        return _TABLES[name]
    except KeyError:
        raise KeyError(f"no timeline table {name!r}; registered: {', '.join(sorted(_TABLES))}") from None


def exempt_model(model: type, *, reason: str) -> None:
    """Declare that `model`, though it has a turn column, is not per-turn state of a save."""
    if not reason.strip():
        raise ValueError(f"say why {model.__name__} is not per-turn state")
    _EXEMPT[model] = reason


def exempt_models() -> dict[type, str]:
    """Return {model: why it is not per-turn state}."""
    return dict(_EXEMPT)


def _looks_per_turn(model: type, registered: set[type]) -> bool:
    for f in model._meta.concrete_fields:
        if TURN_COLUMN.search(f.name) or getattr(f, "related_model", None) in registered:
            return True
    return False


def unregistered_models(models=None) -> list[type]:
    """Return the models that look per-turn but are neither registered nor exempt.

    `models` defaults to every installed model (`django.apps.apps.get_models()`). A model
    looks per-turn with a column named `turn_id`, `*_turn_id`, `turn` or `*_turn` (a turn
    range: `first_turn`, `last_turn`), or with a foreign key to a registered table (an
    Event, a draft): a cascade would delete its rows on a rewind, but no preview would count
    them and no fork would copy them.
    """
    if models is None:
        from django.apps import apps

        models = apps.get_models()
    registered = {t.model for t in _TABLES.values()}
    return [
        m for m in models
        if m not in registered and m not in _EXEMPT and _looks_per_turn(m, registered)
    ]


def count_labels() -> dict[str, str]:
    """Return {count name: label for pages} for every registered table's counts."""
    labels: dict[str, str] = {}
    for entry in registered_tables():
        labels.update(entry.labels)
    return labels


def roll_back(save, n: int) -> dict[str, int]:
    """Roll every registered table of `save` back to turn `n`; return the counts by name.

    Runs in the caller's transaction, table by table in registry order; the caller holds
    the save's lock and moves its current turn.
    """
    counts: dict[str, int] = {}
    for entry in registered_tables():
        counts.update(entry.rollback(save, n))
    return counts


def count_rollback(save, n: int) -> dict[str, int]:
    """Return what `roll_back(save, n)` would delete or change, by the same names."""
    counts: dict[str, int] = {}
    for entry in registered_tables():
        counts.update(entry.count(save, n))
    return counts


def copy_up_to(*, source, fork, target_turn: int) -> ForkContext:
    """Copy every registered table of `source` as it stood at `target_turn` into `fork`.

    Runs in the caller's transaction; return the context with the id maps the copies made.
    """
    ctx = ForkContext(source=source, fork=fork, target_turn=target_turn)
    for entry in registered_tables():
        if entry.copy is not None:
            entry.copy(ctx)
    return ctx
