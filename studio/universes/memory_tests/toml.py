"""Memory tests in Universe-as-Code: the `[[memory_tests]]` tables, written and read.

One table per test, the flat record of `spec` (the same fields as the API's JSON), sorted by
name; optional values that are empty are left out (TOML has no null: no `until` means none)::

    [[memory_tests]]
    name = "mira-learns-the-ledger"
    kind = "knows"
    turn = 20
    character = "Mira"
    knows = true
    entry = "ledger"

Reading checks each table with `spec.parse_spec` and the entries it names against the file's
own `[[lore]]` entry ids (the universe will match the file), and names the line of a bad field.
"""

from __future__ import annotations

from typing import Any, Iterable

from studio.universes.memory_tests.services import memory_test_reference_errors
from studio.universes.memory_tests.spec import MemoryTestSpec, SpecError, parse_spec

TABLE = "memory_tests"
MAX_TESTS = 2000


def tests_tables(universe) -> list[dict[str, Any]]:
    """Return the universe's tests as `[[memory_tests]]` tables, sorted by name."""
    return [test.spec.as_dict(compact=True) for test in universe.memory_tests.order_by("name")]


def parse_tests(doc: dict, reader, entry_ids: Iterable[str]) -> list[MemoryTestSpec]:
    """Return the file's tests, checked; `reader.fail` names the line of the first bad field."""
    tables = doc.get(TABLE, [])
    if not isinstance(tables, list):
        reader.fail(f"{TABLE}: expected [[{TABLE}]] tables.", key=TABLE)
    if len(tables) > MAX_TESTS:
        reader.fail(f"{TABLE}: {len(tables)} tests; the limit is {MAX_TESTS}.")
    ids = set(entry_ids)
    specs: list[MemoryTestSpec] = []
    names: set[str] = set()
    for index, table in enumerate(tables):
        loc = {"table": TABLE, "index": index}
        if not isinstance(table, dict):
            reader.fail(f"{TABLE}[{index}]: expected a table.", key=TABLE)
        label = f"{TABLE}[{index}]" + (f" ({table['name']})" if isinstance(table.get("name"), str) else "")
        try:
            spec = parse_spec(table)
            errors = memory_test_reference_errors(spec, ids)
            if errors:
                raise SpecError(errors)
        except SpecError as exc:
            name, messages = next(iter(exc.errors.items()))
            reader.fail(f"{label}.{name}: {' '.join(messages)}", key=name if name in table else None, **loc)
        if spec.name in names:
            reader.fail(f"{label}.name: used twice in this file.", key="name", **loc)
        names.add(spec.name)
        specs.append(spec)
    return specs


def tests_diff(universe, specs: list[MemoryTestSpec]) -> tuple[list[str], list[str], list[str], int]:
    """Return what importing `specs` would do to the universe's tests: created, changed and deleted names,
    and how many stay unchanged."""
    existing = {test.name: test.spec.as_dict() for test in universe.memory_tests.all()}
    created, changed, unchanged = [], [], 0
    for spec in specs:
        before = existing.get(spec.name)
        if before is None:
            created.append(spec.name)
        elif before != spec.as_dict():
            changed.append(spec.name)
        else:
            unchanged += 1
    deleted = sorted(set(existing) - {spec.name for spec in specs})
    return created, changed, deleted, unchanged
