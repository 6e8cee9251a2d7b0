"""docs/architecture.md's module map names every module of `studio/`, and only real ones.

The map is how a newcomer finds a part of the code; a module added without a line there,
or a line left behind by a module that moved, makes it lie. Migrations and empty package
`__init__.py` files are not listed.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"


def module_map(text: str) -> str:
    start = text.index("## Module map")
    return text[start : text.index("\n## ", start + 1)]


def named_paths(section: str) -> set[str]:
    """The `.py` paths in the first column of the section's tables, relative to studio/."""
    cells = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    return {name.removeprefix("studio/") for cell in cells for name in re.findall(r"`([\w/]+\.py)`", cell)}


def listed_modules() -> set[str]:
    out = set()
    for path in (ROOT / "studio").rglob("*.py"):
        if "migrations" in path.parts:
            continue
        if path.name == "__init__.py" and not path.read_text(encoding="utf-8").strip():
            continue
        out.add(path.relative_to(ROOT / "studio").as_posix())
    return out


def test_the_module_map_names_every_module():
    missing = listed_modules() - named_paths(module_map(DOC.read_text(encoding="utf-8")))
    assert not missing, f"add a line to docs/architecture.md's module map for: {', '.join(sorted(missing))}"


def test_the_module_map_names_no_missing_module():
    stale = {
        name
        for name in named_paths(module_map(DOC.read_text(encoding="utf-8")))
        if not (ROOT / "studio" / name).is_file()
    }
    assert not stale, f"docs/architecture.md's module map names modules that do not exist: {', '.join(sorted(stale))}"


# -- the timeline registry's table and example, and the glossary ---------------------------------

TIMELINE_SOURCE = ROOT / "studio" / "memory" / "timeline.py"


def timeline_section(text: str) -> str:
    start = text.index("## The timeline registry")
    return text[start : text.index("\n## ", start + 1)]


def test_the_timeline_table_is_the_registry_with_its_orders(db):
    from studio.memory import timeline

    rows = [
        line.split("|")[1]
        for line in timeline_section(DOC.read_text(encoding="utf-8")).splitlines()
        if re.match(r"\| \w+ \(\d+\)", line)
    ]
    documented = {name: int(order) for cell in rows for name, order in re.findall(r"(\w+) \((\d+)\)", cell)}
    registered = {entry.name: entry.order for entry in timeline.registered_tables()}
    assert documented == registered


def test_the_registration_examples_use_the_registered_order(db):
    """The example of docs/architecture.md and of the registry's own docstring registers a real table: the
    order it shows is that table's (a copied example with another order would put it elsewhere)."""
    from studio.memory import timeline

    for path in (DOC, TIMELINE_SOURCE):
        examples = re.findall(r'TurnTable\.plain\(\s*"(\w+)", \w+, order=(\d+)', path.read_text(encoding="utf-8"))
        assert examples, path
        for name, order in examples:
            assert timeline.table(name).order == int(order), f"{path.name}: {name} order={order}"


def test_the_glossary_describes_what_is_built():
    text = DOC.read_text(encoding="utf-8")
    glossary = text[text.index("## Glossary") :].split("\n## ", 1)[0]
    rows = [line for line in glossary.splitlines() if line.startswith("| **")]
    assert rows
    for row in rows:
        term, meaning, code = (cell.strip() for cell in row.split("|")[1:4])
        assert "planned" not in meaning and "none yet" not in code, term
        for path in re.findall(r"`((?:world|memory|saves|universes|api|inspector|proxy)/[\w/]+\.py)`", code):
            assert (ROOT / "studio" / path).is_file(), f"{term}: {path}"
