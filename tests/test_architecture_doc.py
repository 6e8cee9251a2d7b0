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
    stale = {name for name in named_paths(module_map(DOC.read_text(encoding="utf-8"))) if not (ROOT / "studio" / name).is_file()}
    assert not stale, f"docs/architecture.md's module map names modules that do not exist: {', '.join(sorted(stale))}"
