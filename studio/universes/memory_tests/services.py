"""Writes of a universe's memory tests: create, update, delete, and replace all (Universe-as-Code).

Every write checks the record with `spec.parse_spec` (the one check of the form, the API and
the file) and then against the universe: the entries a test names must be in its Lore Book,
and a name is used once. A refused write raises `SpecError` ({field: [messages]}) and writes
nothing; a replace runs in the caller's transaction, all or nothing.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from django.db import IntegrityError, transaction

from studio.universes.memory_tests.models import MemoryTest
from studio.universes.memory_tests.spec import MemoryTestSpec, SpecError, parse_spec

__all__ = [
    "memory_test_create",
    "memory_test_update",
    "memory_test_delete",
    "memory_tests_replace",
    "memory_test_reference_errors",
]


def memory_test_reference_errors(spec: MemoryTestSpec, entry_ids: Iterable[str]) -> dict[str, list[str]]:
    """Return what `spec` names that is not there: an entry missing from `entry_ids` (the book's)."""
    entry = spec.params.get("entry")
    if entry and entry not in set(entry_ids):
        return {"entry": [f"“{entry}” is not an entry_id of this universe's Lore Book."]}
    return {}


def _checked(universe, data: Mapping[str, Any]) -> MemoryTestSpec:
    spec = parse_spec(data)
    errors = memory_test_reference_errors(spec, universe.lore_entries.values_list("entry_id", flat=True))
    if errors:
        raise SpecError(errors)
    return spec


def _columns(spec: MemoryTestSpec) -> dict[str, Any]:
    params = {name: list(value) if isinstance(value, tuple) else value for name, value in spec.params.items()}
    return {
        "name": spec.name,
        "kind": spec.kind,
        "turn": spec.turn,
        "until_turn": spec.until,
        "description": spec.description,
        "params": params,
    }


def _taken(universe, name: str, *, other_than: int | None = None) -> bool:
    rows = MemoryTest.objects.filter(universe=universe, name=name)
    return rows.exclude(pk=other_than).exists() if other_than else rows.exists()


def memory_test_create(*, universe, data: Mapping[str, Any]) -> MemoryTest:
    """Store a new test from the flat record `data`; raise SpecError when it is refused."""
    spec = _checked(universe, data)
    if _taken(universe, spec.name):
        raise SpecError({"name": [f"a test named “{spec.name}” already exists in this universe."]})
    try:
        with transaction.atomic():
            return MemoryTest.objects.create(universe=universe, **_columns(spec))
    except IntegrityError:  # the same name stored meanwhile
        raise SpecError({"name": [f"a test named “{spec.name}” already exists in this universe."]}) from None


def memory_test_update(*, test: MemoryTest, data: Mapping[str, Any]) -> MemoryTest:
    """Replace `test` with the flat record `data` (its name may change); raise SpecError when refused."""
    spec = _checked(test.universe, data)
    if _taken(test.universe, spec.name, other_than=test.pk):
        raise SpecError({"name": [f"a test named “{spec.name}” already exists in this universe."]})
    for column, value in _columns(spec).items():
        setattr(test, column, value)
    try:
        with transaction.atomic():
            test.save()
    except IntegrityError:
        raise SpecError({"name": [f"a test named “{spec.name}” already exists in this universe."]}) from None
    return test


def memory_test_delete(*, test: MemoryTest) -> None:
    """Delete `test` (the results recorded on saves stay: they keep the test as it ran)."""
    test.delete()


def memory_tests_replace(*, universe, specs: list[MemoryTestSpec]) -> dict[str, int]:
    """Make the universe's tests exactly `specs` (checked already); return created / updated / deleted /
    unchanged counts. Runs in the caller's transaction (a Universe-as-Code import)."""
    existing = {test.name: test for test in MemoryTest.objects.filter(universe=universe)}
    wanted = {spec.name for spec in specs}
    counts = {"created": 0, "updated": 0, "deleted": 0, "unchanged": 0}
    for name, test in existing.items():
        if name not in wanted:
            test.delete()
            counts["deleted"] += 1
    for spec in specs:
        columns = _columns(spec)
        test = existing.get(spec.name)
        if test is None:
            MemoryTest.objects.create(universe=universe, **columns)
            counts["created"] += 1
        elif any(getattr(test, column) != value for column, value in columns.items()):
            for column, value in columns.items():
                setattr(test, column, value)
            test.save()
            counts["updated"] += 1
        else:
            counts["unchanged"] += 1
    return counts
