"""The section registry of the save file, and the checker every section validates with.

A save file carries its data in named *sections* (`turns`, `facts`, `beliefs`, ...). Each
section is a `SaveSection`: a name, a version, and three functions that export its items,
check a file's items, and write them into a new save. The studio's own sections live in
`studio.saves.portable.sections`; another app adds its own without editing this package by
registering one at start-up (the `save_file_sections` extension point of `studio.memory.hooks`)::

    # narrator/apps.py
    class NarratorConfig(AppConfig):
        def ready(self):
            from studio.saves.portable import SaveSection, register_section
            from narrator import portable

            register_section(SaveSection(
                name="narrator_snapshots", version=1, optional=True,  # order: its table's (80)
                export=portable.export_snapshots,   # (ExportContext) -> iterable of dicts
                check=portable.check_snapshots,     # (items, CheckContext, where) -> cleaned items
                load=portable.load_snapshots,       # (cleaned items, ImportContext) -> rows written
            ))

Invariants a section keeps:
- `export` yields JSON-able dicts in a stable order (the same save gives the same items) and
  uses file-local ids, never database ids: `ExportContext.file_ids[name]` maps the pks of
  an earlier section's rows to their file ids (`file_ids["facts"][fact.pk]`), and a section
  fills its own map for the sections after it.
- `check` reports every problem through `ctx.checker` with its location and writes
  nothing; it records the ids it defines in `ctx.ids[name]` so later sections can resolve
  references (`ctx.ids["facts"]` maps a fact's file id to its turn).
- `load` runs inside the import's transaction, after every section was checked; it maps
  file ids to the new rows' pks in `ctx.db_ids[name]`.
- Sections run in `order` (then name): a section may only refer to sections before it. The
  orders are one scale with the timeline registry's tables (`studio.memory.hooks`): a section
  that carries per-turn tables leaves `order` None and takes theirs (the lowest), and a
  per-turn table whose section has no hand-written `SaveSection` gets one derived from its
  columns (`sections.derived`), so a plain table is in the file with its one registration.

`optional=True` is written into the file: a studio that does not know the section may
import the file without it (with a warning). A file with an unknown section that is not
marked optional is refused, because importing it would silently lose that state.
`required=True` refuses a file that lacks the section; other sections missing from a file
(say, one exported before the section existed) import as empty.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterable, Iterator

from studio import limits as field_limits
from studio.memory import hooks

INT_MAX = 2**31 - 1  # PositiveIntegerField on PostgreSQL is a 4-byte integer
SECTION_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


@dataclass(frozen=True)
class PortableLimits:
    """Bounds on what one save file may hold (the byte size is AXIOM_SAVE_FILE_MAX_BYTES).

    The fields with declared limits (a turn's texts, the save's name, the play settings,
    character names, chapter notes and summaries) are read with `Checker.limited`, the check
    every other path applies (`studio/limits.py`); the turn cap is the transcript importer's;
    the rest only keep a hostile file from making the checker or the database do unbounded work.
    """

    max_turns: int = 20_000
    max_items: int = 500_000
    max_list_items: int = 10_000
    max_player_input_chars: int = field_limits.TURN_INPUT.max_chars
    max_narrative_chars: int = field_limits.TURN_NARRATIVE.max_chars
    max_text_chars: int = 200_000
    max_depth: int = 64
    max_problems: int = 50


LIMITS = PortableLimits()


@dataclass
class Problem:
    """One thing wrong with a save file: where (a JSON path) and what."""

    location: str
    message: str

    def __str__(self) -> str:
        return f"{self.location}: {self.message}" if self.location else self.message

    def as_json(self) -> dict[str, str]:
        return {"location": self.location, "message": self.message}


class SaveFileError(ValueError):
    """The file cannot be imported; `problems` lists what is wrong (nothing was written)."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        self.errors = [str(p) for p in problems]
        first = "; ".join(self.errors[:3])
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        super().__init__(first + more)


class SaveFileTooLarge(SaveFileError):
    """The file, or what it decompresses to, is larger than AXIOM_SAVE_FILE_MAX_BYTES."""


class TooManyProblems(Exception):
    """Raised by the checker once it holds `max_problems`: the rest of the file is not read."""


INVALID = object()  # what a reader returns after recording a problem


class Checker:
    """Read typed values out of a parsed file, recording a Problem for each bad one."""

    def __init__(self, limits: PortableLimits = LIMITS):
        self.limits = limits
        self.problems: list[Problem] = []

    def add(self, location: str, message: str) -> None:
        self.problems.append(Problem(location, message))
        if len(self.problems) >= self.limits.max_problems:
            raise TooManyProblems()

    def integer(self, value: Any, loc: str, *, minimum: int = 0, maximum: int = INT_MAX, nullable: bool = False):
        if value is None and nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.add(loc, f"must be a whole number, not {_kind(value)}")
            return INVALID
        if value < minimum or value > maximum:
            self.add(loc, f"must be between {minimum} and {maximum}, not {value}")
            return INVALID
        return value

    def text(self, value: Any, loc: str, *, max_length: int | None = None, blank: bool = True):
        if not isinstance(value, str):
            self.add(loc, f"must be a string, not {_kind(value)}")
            return INVALID
        limit = max_length or self.limits.max_text_chars
        if len(value) > limit:
            self.add(loc, f"is {len(value)} characters long; at most {limit} are allowed")
            return INVALID
        if not blank and not value.strip():
            self.add(loc, "must not be blank")
            return INVALID
        return value

    def limited(self, value: Any, loc: str, field: str):
        """Read a value of a field with a declared limit (`studio/limits.py`: the API's and the pages' check)."""
        problem = field_limits.problem(field, value)
        if problem:
            self.add(loc, problem.rstrip("."))
            return INVALID
        return value

    def boolean(self, value: Any, loc: str):
        if not isinstance(value, bool):
            self.add(loc, f"must be true or false, not {_kind(value)}")
            return INVALID
        return value

    def timestamp(self, value: Any, loc: str):
        if not isinstance(value, str):
            self.add(loc, f"must be an ISO 8601 time string, not {_kind(value)}")
            return INVALID
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            self.add(loc, f"is not an ISO 8601 time: {value[:40]!r}")
            return INVALID
        if parsed.tzinfo is None:
            self.add(loc, f"needs a time zone (such as Z): {value[:40]!r}")
            return INVALID
        return parsed

    def mapping(self, value: Any, loc: str, *, nullable: bool = False):
        if value is None and nullable:
            return None
        if not isinstance(value, dict):
            self.add(loc, f"must be a JSON object, not {_kind(value)}")
            return INVALID
        return value

    def array(self, value: Any, loc: str, *, max_items: int | None = None):
        if not isinstance(value, list):
            self.add(loc, f"must be a list, not {_kind(value)}")
            return INVALID
        limit = max_items or self.limits.max_list_items
        if len(value) > limit:
            self.add(loc, f"holds {len(value)} items; at most {limit} are allowed")
            return INVALID
        return value

    def names(self, value: Any, loc: str, *, max_items: int, max_length: int = 0, field: str = ""):
        """Read a list of non-blank strings: names within the declared limit of `field` (character
        names), or ids of at most `max_length` characters (lore entry ids)."""
        value = self.array(value, loc, max_items=max_items)
        if value is INVALID:
            return value
        for index, name in enumerate(value):
            where = f"{loc}[{index}]"
            read = (
                self.limited(name, where, field)
                if field
                else self.text(name, where, max_length=max_length, blank=False)
            )
            if read is INVALID:
                return INVALID
        return value

    def choice(self, value: Any, loc: str, choices: Iterable[str]):
        choices = list(choices)
        if not isinstance(value, str) or value not in choices:
            self.add(loc, f"must be one of {', '.join(choices)}, not {_short(value)}")
            return INVALID
        return value

    def record(
        self, value: Any, loc: str, spec: dict[str, Callable[[Any, str], Any]], *, optional: Iterable[str] = ()
    ) -> dict | None:
        """Check an object against `spec` ({key: reader}); return its valid fields, or None.

        Missing required keys and unknown keys are problems; a field whose reader recorded a
        problem is left out of the result, so callers test `"key" in result`.
        """
        if not isinstance(value, dict):
            self.add(loc, f"must be a JSON object, not {_kind(value)}")
            return None
        optional = set(optional)
        for key in value:
            if key not in spec:
                self.add(f"{loc}.{key}", "is not a field of this object (expected: " + ", ".join(spec) + ")")
        out: dict[str, Any] = {}
        for key, reader in spec.items():
            if key not in value:
                if key not in optional:
                    self.add(f"{loc}.{key}", "is missing")
                continue
            cleaned = reader(value[key], f"{loc}.{key}")
            if cleaned is not INVALID:
                out[key] = cleaned
        return out


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"[:60]
    if isinstance(value, str):
        return f"the string {value[:30]!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _short(value: Any) -> str:
    return repr(value)[:40]


@dataclass
class ExportContext:
    """What a section's `export` sees: the save (locked) and the file ids given so far."""

    game_save: Any
    file_ids: dict[str, dict[int, int]] = field(default_factory=dict)


@dataclass
class CheckContext:
    """What a section's `check` sees: the checked save header and the ids defined so far."""

    checker: Checker
    current_turn: int
    timeline_generation: int
    ids: dict[str, dict[int, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    version: int = 1  # the version of the section being checked, as the file gives it (`SaveSection.reads`)

    def turn(self, value: Any, loc: str, *, first: int = 0, nullable: bool = False):
        """Read a turn id that must exist in the save: `first`..current turn (0 = the start)."""
        value = self.checker.integer(value, loc, nullable=nullable)
        if value is INVALID or value is None:
            return value
        if not first <= value <= self.current_turn:
            self.checker.add(loc, f"turn {value} does not exist: the save's turns are {first}..{self.current_turn}")
            return INVALID
        return value

    def records(self, items: list, where: str, spec: dict, *, optional=()) -> Iterator[tuple[str, dict]]:
        """Yield (location, item) for each of `items` that is a record (`Checker.record`: its fields read
        by `spec`, those in `optional` may be missing); a field that failed is missing from its item."""
        for index, raw in enumerate(items):
            loc = f"{where}[{index}]"
            item = self.checker.record(raw, loc, spec, optional=optional)
            if item is not None:
                yield loc, item

    def complete_records(
        self, items: list, where: str, spec: dict, *, one_per_turn: str = ""
    ) -> Iterator[tuple[str, dict]]:
        """Yield (location, item) for each of `items` whose every field passed `spec`'s readers.

        `one_per_turn` (what an item records, e.g. "presence"): a section of per-turn rows
        keeps one item per `turn_id`; a second is a problem ("turn 3 has two presence
        records") and left out.
        """
        seen: set[int] = set()
        for loc, item in self.records(items, where, spec):
            if len(item) != len(spec):
                continue
            if one_per_turn:
                if item["turn_id"] in seen:
                    self.checker.add(f"{loc}.turn_id", f"turn {item['turn_id']} has two {one_per_turn} records")
                    continue
                seen.add(item["turn_id"])
            yield loc, item

    def reference(self, value: Any, loc: str, section: str, *, what: str):
        """Read a file id that must name an item of an earlier `section`."""
        value = self.checker.integer(value, loc, minimum=1)
        if value is INVALID:
            return value
        if value not in self.ids.get(section, {}):
            self.checker.add(loc, f"points at {what} {value}, which is not in the file's {section}")
            return INVALID
        return value

    def unique_id(self, value: Any, loc: str, section: str):
        """Read an item's own file id (a whole number >= 1, unique within `section`)."""
        value = self.checker.integer(value, loc, minimum=1)
        if value is INVALID:
            return value
        seen = self.ids.setdefault(section, {})
        if value in seen:
            self.checker.add(loc, f"id {value} is used twice in {section}")
            return INVALID
        return value


@dataclass
class ImportContext:
    """What a section's `load` sees: the new save and the new pks of earlier sections."""

    game_save: Any
    db_ids: dict[str, dict[int, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class SaveSection:
    name: str
    version: int
    export: Callable[[ExportContext], Iterable[dict]]
    check: Callable[[list, CheckContext, str], list[dict]]
    load: Callable[[list[dict], ImportContext], int]
    order: int | None = None  # None: the order of the per-turn tables it carries (`studio.memory.timeline`)
    optional: bool = False
    required: bool = False
    reads: tuple[int, ...] = ()  # the older versions of the section its `check` still reads (`CheckContext.version`)

    def __post_init__(self):
        if not SECTION_NAME.match(self.name):
            raise ValueError(f"a section name is lower-case letters, digits and _: {self.name!r}")
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 1:
            raise ValueError(f"a section version is a whole number >= 1: {self.version!r}")


def _table_orders() -> dict[str, int]:
    """{section name: the lowest order of the per-turn tables it carries}."""
    from studio.memory import timeline

    orders: dict[str, int] = {}
    for entry in timeline.registered_tables():
        if entry.section is not None:
            orders[entry.section] = min(orders.get(entry.section, entry.order), entry.order)
    return orders


def section_order(section: SaveSection) -> int:
    """The order `section` runs at: its own, or that of the per-turn tables it carries."""
    if section.order is not None:
        return section.order
    try:
        return _table_orders()[section.name]
    except KeyError:
        raise ValueError(f"save-file section {section.name!r} has no order and no per-turn table names it") from None


_SECTIONS = hooks.extension_point("save_file_sections", order_of=section_order)


def register_section(section: SaveSection, *, replace: bool = False) -> SaveSection:
    """Add `section` to every export and import from now on; return it.

    Registering a second section under a taken name raises ValueError unless `replace`
    (meant for tests) is set.
    """
    return _SECTIONS.register(section, replace=replace)


def unregister_section(name: str) -> None:
    """Remove a section (tests); unknown names are ignored."""
    _SECTIONS.unregister(name)


_derive: Callable[[Any, int], SaveSection] | None = None


def derive_sections_with(derive: Callable[[Any, int], SaveSection]) -> None:
    """Set how the section of a per-turn table no one wrote one for is made (`sections.derived`,
    set when the sections package is imported: this module imports no section)."""
    global _derive
    _derive = derive


def registered_sections() -> list[SaveSection]:
    """Return the sections in the order they are exported and imported: the registered ones and
    those derived for the per-turn tables whose section no one registered."""
    import dataclasses

    from studio.memory import timeline

    orders = _table_orders()
    sections = {s.name: s if s.order is not None else dataclasses.replace(s, order=section_order(s)) for s in _SECTIONS}
    for entry in timeline.registered_tables():
        if entry.section is not None and entry.section not in sections:
            if _derive is None:
                raise LookupError(f"no save-file section {entry.section!r} for timeline table {entry.name!r}")
            sections[entry.section] = _derive(entry, orders[entry.section])
    return sorted(sections.values(), key=lambda s: (s.order, s.name))
