"""The timeline registry: every table keyed by save and turn, and a turn's whole lifecycle in it.

A save's timeline is spread over many tables (the Event_Log, the state cache, facts,
beliefs, mental models, lore activations, chapters, narrator snapshots, ...). Appending a
turn, rewinding, previewing a rewind, forking, the demo's trim and the save file must treat
every one of them, so none walks a list of its own: each app registers its per-turn tables
here at start-up (`AppConfig.ready()`, the `turn_tables` extension point of
`studio.memory.hooks`), and they loop over the registry. A plain table is one line::

    # myapp/apps.py
    class MyAppConfig(AppConfig):
        def ready(self):
            from studio.memory import timeline
            from myapp.models import Presence

            timeline.register_table(timeline.TurnTable.plain(
                "presence", Presence, order=25, section="presence", label="Presence records",
                append=lambda turn: Presence.objects.create(game_save=turn.save, turn_id=turn.turn_id),
            ))

A `TurnTable` gives, for its model:
- `append(turn)`: what runs when a turn is appended (`append_turn`, a `TurnAppend`: the
  locked save, the turn's id, input, narrative and state), in the turn's transaction, by
  every path that appends (play, the API, the proxy, imports, the demo);
- `rollback(save, n)`: make the rows as they stood at turn N (delete the later ones, roll
  changed ones back), inside the caller's transaction; return counts by name; `rewound`
  runs after every table rolled back, with the save at its new generation;
- `count(save, n)`: the same counts without changing anything (the rewind preview), so a
  preview and the rewind that follows it report the same numbers; `labels` names each
  count for pages, `preview` puts it in the preview's sentence;
- `copy(ctx)`: copy the rows as they stood at N into a fork (`ForkContext`), or None when a
  fork starts without them (say why in `note`). `TurnTable.plain` derives the copy from
  the model's concrete columns (`copy_columns`), so a new column is forked; a column that
  holds another table's id is declared in `remaps`. `forked` runs after every table is
  copied (a table whose rows wait on a job queues it again for the fork);
- `section`: the save-file section that carries the rows (`studio.saves.portable`; one is
  derived from the columns when no hand-written section has the name), or None when a
  save file leaves them out (say why in `note`).

Tables run in `order` (then name), one scale with the save-file sections
(`studio.memory.hooks`): append runs the hooks in that order (the Event first), a rewind
deletes and a fork copies in that order, so every rewind takes its row locks in one order,
and a fork copies a table after the tables whose ids it remaps (`ForkContext.ids`). A model
with a turn column that is not per-turn state (the Save itself, the job ledger) is
declared with `exempt_model(model, reason=...)`; `unregistered_models()` lists the models
that look per-turn (a `turn_id` or `*_turn` / `*_turn_id` column, or a foreign key to a
registered table) and are neither, and a test keeps that list empty.

The registry only holds functions; it imports no app. The loops (`append_turn`,
`roll_back`, `count_rollback`, `copy_up_to`) run inside the caller's transaction and never
commit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from studio.memory import hooks, turn_rows

__all__ = [
    "Exempt",
    "ForkContext",
    "SkipRow",
    "TurnAppend",
    "TurnTable",
    "append_turn",
    "copy_columns",
    "register_table",
    "unregister_table",
    "registered_tables",
    "row_columns",
    "table",
    "exempt_model",
    "exempt_models",
    "unregistered_models",
    "count_labels",
    "preview_details",
    "preview_sentence",
    "memory_rewound",
    "roll_back",
    "rewound",
    "count_rollback",
    "copy_up_to",
]

TABLE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
# turn_id, created_turn_id, first_turn, last_turn, ...: a column that places a row on the timeline.
TURN_COLUMN = re.compile(r"(^|_)turn(_id)?$")
# Columns a row's copy leaves out: its id and its save (the fork's own).
NOT_COPIED = ("id", "game_save")


@dataclass
class TurnAppend:
    """What a table's `append` sees: the save (locked) and the turn being appended.

    `options` carries what a caller hands the hooks (the demo's character index); `rows`
    holds what a hook wrote, by table name, for the tables after it and the caller (the
    Event under "events").
    """

    save: Any
    turn_id: int
    player_input: str = ""
    narrative: str = ""
    state: dict | None = None
    options: dict[str, Any] = field(default_factory=dict)
    rows: dict[str, Any] = field(default_factory=dict)


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


class SkipRow(Exception):
    """Raised by a remap: the row cites a row the fork does not have, so it is not copied."""


def row_columns(model, *, timestamps: bool = True) -> list[str]:
    """The attnames of `model`'s concrete columns a copy carries: all but the id and the save
    (and, with `timestamps=False`, the `auto_now` / `auto_now_add` ones)."""
    return [
        f.attname
        for f in model._meta.concrete_fields
        if not f.primary_key
        and f.name not in NOT_COPIED
        and (timestamps or not (getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False)))
    ]


def copy_columns(model, *, turn_field: str = "turn_id", remaps: dict | None = None, manager: str = "_base_manager"):
    """Return a fork `copy` for `model`: its rows at `turn_field` <= N, every concrete column.

    Without `remaps`, one INSERT ... SELECT. A remapped column holds another table's id:
    `remaps[attname]` names that table (the row gets the fork's copy of it; a row citing a
    row the fork lacks is left out, a null stays null) or is a function
    `(value, row, ctx) -> value` (raise `SkipRow` to leave the row out). Rows keep their
    order (by id) and their times.
    """
    remaps = dict(remaps or {})

    def copy(ctx: ForkContext) -> None:
        if not remaps:
            turn_rows.copy_turn_rows(model, ctx.source.pk, ctx.fork.pk, ctx.target_turn, turn_field=turn_field)
            return
        columns = row_columns(model)
        ids = {column: ctx.ids_of(how) for column, how in remaps.items() if isinstance(how, str)}
        out = []
        rows = getattr(model, manager).filter(game_save_id=ctx.source.pk, **{f"{turn_field}__lte": ctx.target_turn})
        for row in rows.order_by("pk").values(*columns):
            try:
                for column, how in remaps.items():
                    value = row[column]
                    if isinstance(how, str):
                        if value is not None:
                            if value not in ids[column]:
                                raise SkipRow(column)
                            row[column] = ids[column][value]
                    else:
                        row[column] = how(value, row, ctx)
            except SkipRow:
                continue
            out.append({**row, "game_save_id": ctx.fork.pk})
        turn_rows.insert_values(model, out)

    copy.turn_field, copy.remaps = turn_field, remaps  # what a derived save-file section reads
    return copy


@dataclass(frozen=True)
class TurnTable:
    """One table keyed by save and turn, and what each step of a turn's lifecycle does to it."""

    name: str
    model: type
    rollback: Callable[[Any, int], dict[str, int]]
    count: Callable[[Any, int], dict[str, int]]
    copy: Callable[[ForkContext], Any] | None
    section: str | None
    order: int = 100
    labels: dict[str, str] = field(default_factory=dict)
    note: str = ""
    # Runs when a turn is appended (`append_turn`), in order.
    append: Callable[[TurnAppend], Any] | None = None
    # Runs after every table rolled back, the save at its new turn and generation: (save, n, counts).
    rewound: Callable[[Any, int, dict], Any] | None = None
    # Runs after every table is copied into a fork (queue the fork's own unfinished work).
    forked: Callable[[ForkContext], Any] | None = None
    # The preview's sentence: {count name: (what, "deletes" | "rolls back")}, "what" singular.
    preview: dict[str, tuple[str, str]] = field(default_factory=dict)
    # Rows the living pipeline derives from a turn's narrative (facts, beliefs, mental models):
    # a running living job read them, and re-extracting a turn rolls them back (`roll_back(living=True)`).
    living: bool = False
    # A running living or refresh job read these rows (beliefs, mental models): a rewind that
    # changed any sends it back to the queue (`memory_rewound`).
    read_by_jobs: bool = False
    # What a rewind preview lists of the rows (save, n) -> {RewindPreview field: rows}.
    details: Callable[[Any, int], dict[str, Any]] | None = None

    def __post_init__(self):
        if not TABLE_NAME.match(self.name):
            raise ValueError(f"a timeline table name is lower-case letters, digits and _: {self.name!r}")
        if (self.copy is None or self.section is None) and not self.note.strip():
            raise ValueError(
                f"timeline table {self.name!r} is not copied to a fork or not in the save file: say why in `note`"
            )
        for count, (_what, verb) in self.preview.items():
            if verb not in ("deletes", "rolls back"):
                raise ValueError(f"{self.name}: preview of {count!r} must say 'deletes' or 'rolls back', not {verb!r}")

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
        turn_field: str = "turn_id",
        remaps: dict | None = None,
        append: Callable[[TurnAppend], Any] | None = None,
        forked: Callable[[ForkContext], Any] | None = None,
        preview: str = "",
    ) -> "TurnTable":
        """A table of rows that never change, one turn each (`turn_field`): a rewind deletes the
        rows after N, a fork copies every column of the rows up to N (`copy_columns`, with
        `remaps`), the save file carries them in `section`.

        `counted=False` keeps the table out of the rewind's counts (it still rolls back);
        `copied=False` leaves its rows out of a fork; `preview` (what a row is, singular)
        names the deleted rows in the preview's sentence.
        """

        def rollback(save, n: int) -> dict[str, int]:
            deleted = turn_rows.delete_after(model, save.pk, n, turn_field=turn_field)
            return {name: deleted} if counted else {}

        def count(save, n: int) -> dict[str, int]:
            return {name: turn_rows.count_after(model, save.pk, n, turn_field=turn_field)} if counted else {}

        return cls(
            name=name,
            model=model,
            rollback=rollback,
            count=count,
            copy=copy_columns(model, turn_field=turn_field, remaps=remaps) if copied else None,
            section=section,
            order=order,
            labels={name: label} if counted and label else {},
            note=note,
            append=append,
            forked=forked,
            preview={name: (preview, "deletes")} if counted and preview else {},
        )


@dataclass(frozen=True)
class Exempt:
    """A model with a turn column that is not per-turn state, and why (the `exempt_models` point)."""

    model: type
    reason: str
    order: int = 0

    @property
    def name(self) -> str:
        return self.model._meta.label


_TABLES: hooks.Registry[TurnTable] = hooks.extension_point("turn_tables")
_EXEMPT: hooks.Registry[Exempt] = hooks.extension_point("exempt_models")


def register_table(entry: TurnTable, *, replace: bool = False) -> TurnTable:
    """Add `entry` to every append, rewind, preview, fork, demo trim and save file from now on; return it.

    A second table under a taken name, or a second registration of one model, raises
    ValueError unless `replace` (meant for tests) is set.
    """
    if not replace:
        taken = _TABLES.find(entry.name)
        if taken is not None and taken != entry:
            raise ValueError(f"a timeline table named {entry.name!r} is already registered")
        for other in _TABLES:
            if other.model is entry.model and other.name != entry.name:
                raise ValueError(f"{entry.model.__name__} is already registered as timeline table {other.name!r}")
    return _TABLES.register(entry, replace=True)


def unregister_table(name: str) -> None:
    """Remove a table (tests); unknown names are ignored."""
    _TABLES.unregister(name)


def registered_tables() -> list[TurnTable]:
    """Return the registered tables in the order append, rewind and fork treat them."""
    return _TABLES.entries()


def table(name: str) -> TurnTable:
    """Return the registered table `name` (KeyError names the registered ones)."""
    try:
        return _TABLES.get(name)
    except KeyError:
        raise KeyError(
            f"no timeline table {name!r}; registered: {', '.join(sorted(t.name for t in _TABLES))}"
        ) from None


def exempt_model(model: type, *, reason: str) -> None:
    """Declare that `model`, though it has a turn column, is not per-turn state of a save."""
    if not reason.strip():
        raise ValueError(f"say why {model.__name__} is not per-turn state")
    _EXEMPT.register(Exempt(model, reason), replace=True)


def exempt_models() -> dict[type, str]:
    """Return {model: why it is not per-turn state}."""
    return {entry.model: entry.reason for entry in _EXEMPT}


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
    registered = {t.model for t in _TABLES}
    exempt = {entry.model for entry in _EXEMPT}
    return [m for m in models if m not in registered and m not in exempt and _looks_per_turn(m, registered)]


def count_labels() -> dict[str, str]:
    """Return {count name: label for pages} for every registered table's counts."""
    labels: dict[str, str] = {}
    for entry in registered_tables():
        labels.update(entry.labels)
    return labels


def preview_sentence(counts: dict[str, int], plural: Callable[[int, str], str]) -> str:
    """The preview's sentence from the tables' `preview` lines: "deletes 2 turns, 1 fact and 0 beliefs,
    and rolls back 1 belief" (`plural(n, word)` counts a word), in registry order."""
    parts: dict[str, list[str]] = {"deletes": [], "rolls back": []}
    for entry in registered_tables():
        for count, (what, verb) in entry.preview.items():
            parts[verb].append(plural(counts.get(count) or 0, what))

    def listed(items: list[str]) -> str:
        return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]

    said = [f"{verb} {listed(items)}" for verb, items in parts.items() if items]
    return ", and ".join(said)


def preview_details(save, n: int) -> dict[str, Any]:
    """What the tables' `details` list for a preview of a rewind to `n` (the beliefs and mental
    models deleted and rolled back), merged in registry order."""
    details: dict[str, Any] = {}
    for entry in registered_tables():
        if entry.details is not None:
            details.update(entry.details(save, n))
    return details


def memory_rewound(counts: dict[str, int]) -> bool:
    """True when a rewind's `counts` show it deleted or changed rows a running living job read
    (the `read_by_jobs` tables)."""
    read = [entry for entry in registered_tables() if entry.read_by_jobs]
    return any(counts.get(name) for entry in read for name in entry.labels or {entry.name: ""})


def append_turn(turn: TurnAppend) -> TurnAppend:
    """Run every registered table's `append` for `turn`, in registry order; return `turn`.

    Runs in the caller's transaction, the save locked; the caller moves its current turn.
    """
    for entry in registered_tables():
        if entry.append is not None:
            entry.append(turn)
    return turn


def roll_back(save, n: int, *, living: bool = False) -> dict[str, int]:
    """Roll every registered table of `save` back to turn `n`; return the counts by name.

    Runs in the caller's transaction, table by table in registry order; the caller holds
    the save's lock and moves its current turn (then calls `rewound`). `living=True` rolls
    back only the `living` tables: what a turn's extraction derived (re-extracting the last
    turn forgets its outputs this way).
    """
    counts: dict[str, int] = {}
    for entry in registered_tables():
        if entry.living or not living:
            counts.update(entry.rollback(save, n))
    return counts


def rewound(save, n: int, counts: dict[str, int]) -> None:
    """Run the tables' `rewound` hooks once a rewind to `n` moved `save` (its new turn and generation)."""
    for entry in registered_tables():
        if entry.rewound is not None:
            entry.rewound(save, n, counts)


def count_rollback(save, n: int) -> dict[str, int]:
    """Return what `roll_back(save, n)` would delete or change, by the same names."""
    counts: dict[str, int] = {}
    for entry in registered_tables():
        counts.update(entry.count(save, n))
    return counts


def copy_up_to(*, source, fork, target_turn: int) -> ForkContext:
    """Copy every registered table of `source` as it stood at `target_turn` into `fork`, then
    run the tables' `forked` hooks (each re-queues the fork's own unfinished work).

    Runs in the caller's transaction; return the context with the id maps the copies made.
    """
    ctx = ForkContext(source=source, fork=fork, target_turn=target_turn)
    for entry in registered_tables():
        if entry.copy is not None:
            entry.copy(ctx)
    for entry in registered_tables():
        if entry.forked is not None:
            entry.forked(ctx)
    return ctx
