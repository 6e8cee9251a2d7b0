"""The studio's extension points, declared in one place (as Datasette's `hookspecs` do).

An app extends the studio by registering entries at start-up (`AppConfig.ready()`); the code
that runs them loops over a registry and never imports the app. Every registry is a
`Registry`: entries are named, a name is taken once (the same entry again is no change, a
different one raises ValueError unless `replace`, meant for tests), and they run in one
order, `(order, name)`. This module imports no app and no Django: the entries' types live
with the code that runs them.

The extension points (`EXTENSION_POINTS` lists them for the docs and the tests):

`turn_tables` -- `studio.memory.timeline.TurnTable`, by `timeline.register_table(entry)`.
    A table keyed by save and turn: one registration gives its append hook
    (`append(turn: TurnAppend) -> None`), its rewind (`rollback(save, n) -> counts`, and the
    preview's `count(save, n) -> counts` with a line per count), its fork
    (`copy(ForkContext)`, derived from the model's concrete columns with declared `remaps`,
    then `forked(ForkContext)`), and its save-file section (`section`, a name). Order: the
    append runs the hooks in order (the Event first), a rewind deletes and a fork copies in
    order (a table after those whose ids it remaps), and the save file writes the table's
    section at the table's order.
`save_file_sections` -- `studio.saves.portable.SaveSection`, by `register_section(section)`.
    A section's `export(ExportContext)`, `check(items, CheckContext, where)` and
    `load(items, ImportContext)`. Order: a section is exported, checked and loaded after
    every section with a lower order, and may refer only to those. A section that carries a
    per-turn table takes that table's order (`order=None`); a per-turn table whose section
    has no hand-written `SaveSection` gets one derived from its columns.
`job_kinds` -- `studio.memory.jobs.JobHandler`, by `jobs.register(kind, run, ...)`.
    The function that runs one job of a kind (`run(JobContext) -> dict`), how its jobs are
    claimed, and `on_not_queued(job, error)`. Order: `JobKind` order (only listings use it).
`exempt_models` -- `studio.memory.timeline.Exempt`, by `timeline.exempt_model(model, reason=...)`.
    A model with a turn column that is not per-turn state (the Save, the job ledger), with
    why. Order: by name (only listings use it).

The orders share one scale, so a save file's sections and the timeline's tables interleave
as one list: 10 turns (events 10, states 20), 25 presence, 30 facts, 35 reveals, 40
beliefs, 50 mental models, 52 jobs, 54 the LLM call log, 60 recorded queries, 70 lore
activation, 75 chapters, 80 narrator snapshots, 82 play settings, 85 continuity findings,
90 drafts, 95 memory-test results. A new table or section picks a free number after those
it refers to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterator, TypeVar

__all__ = ["EXTENSION_POINTS", "ExtensionPoint", "Registry", "extension_point"]

T = TypeVar("T")


class Registry(Generic[T]):
    """Named entries of one extension point, run in `(order, name)` order.

    `name_of(entry)` and `order_of(entry)` read an entry's name and order (its `name` and
    `order` attributes unless given).
    """

    def __init__(
        self,
        point: str,
        *,
        name_of: Callable[[T], str] = lambda entry: entry.name,
        order_of: Callable[[T], Any] = lambda entry: entry.order,
    ):
        self.point = point
        self._name_of = name_of
        self._order_of = order_of
        self._entries: dict[str, T] = {}

    def register(self, entry: T, *, replace: bool = False) -> T:
        """Add `entry`; return it. A different entry under a taken name raises ValueError unless `replace`."""
        name = self._name_of(entry)
        taken = self._entries.get(name)
        if taken is not None and not replace and taken != entry:
            raise ValueError(f"a {self.point} entry named {name!r} is already registered")
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> None:
        """Remove the entry `name` (tests); an unknown name is ignored."""
        self._entries.pop(name, None)

    def get(self, name: str) -> T:
        """Return the entry `name`; KeyError names the registered ones."""
        try:
            return self._entries[name]
        except KeyError:
            raise KeyError(f"no {self.point} entry {name!r}; registered: {', '.join(sorted(self._entries))}") from None

    def find(self, name: str) -> T | None:
        """Return the entry `name`, or None."""
        return self._entries.get(name)

    def entries(self) -> list[T]:
        """Return the entries in the order they run."""
        return sorted(self._entries.values(), key=lambda entry: (self._order_of(entry), self._name_of(entry)))

    def __iter__(self) -> Iterator[T]:
        return iter(self.entries())

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)


@dataclass(frozen=True)
class ExtensionPoint:
    """An extension point as the docs list it: its name, what an entry is, how it registers, its order."""

    name: str
    entry: str
    register: str
    order: str


EXTENSION_POINTS = [
    ExtensionPoint(
        "turn_tables",
        "studio.memory.timeline.TurnTable",
        "timeline.register_table(entry)",
        "append, rewind and fork run the tables in order; a table's save-file section is written at its order",
    ),
    ExtensionPoint(
        "save_file_sections",
        "studio.saves.portable.SaveSection",
        "portable.register_section(section)",
        "exported, checked and loaded in order; a section refers only to sections before it",
    ),
    ExtensionPoint("job_kinds", "studio.memory.jobs.JobHandler", "jobs.register(kind, run, ...)", "JobKind order"),
    ExtensionPoint(
        "exempt_models", "studio.memory.timeline.Exempt", "timeline.exempt_model(model, reason=...)", "by name"
    ),
]

_REGISTRIES: dict[str, Registry] = {}


def extension_point(name: str, **kwargs) -> Registry:
    """Return the registry of the declared extension point `name` (made once, on first use)."""
    if name not in {point.name for point in EXTENSION_POINTS}:
        raise KeyError(f"{name!r} is not an extension point declared in studio.memory.hooks")
    if name not in _REGISTRIES:
        _REGISTRIES[name] = Registry(name, **kwargs)
    return _REGISTRIES[name]
