"""No module of `studio/` grows past ~600 lines, apart from declarative ones.

A module that long holds more than one thing a reader looks for: split it (as the search
became `studio/memory/retrieval/` and the job runner `studio/memory/jobs/`). Declarative
modules (data, specs, migrations) may be as long as what they declare; they are listed here
by name, with the reason, so a new exception is a visible decision in review.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 600

DECLARATIVE = {}
# Over the limit and to be split, with who holds the module now. Remove the entry when done.
TO_SPLIT: dict[str, str] = {}


def line_count(path: Path) -> int:
    with path.open(encoding="utf-8") as handle:
        return sum(1 for _ in handle)


def oversized(root: Path = ROOT) -> dict[str, int]:
    """{path: lines} of the modules over LIMIT that are neither migrations nor allowed."""
    out = {}
    for path in sorted((root / "studio").rglob("*.py")):
        name = path.relative_to(root).as_posix()
        if "migrations" in path.parts or name in DECLARATIVE or name in TO_SPLIT:
            continue
        if (lines := line_count(path)) > LIMIT:
            out[name] = lines
    return out


def test_no_studio_module_is_over_the_limit():
    found = oversized()
    assert not found, f"modules over {LIMIT} lines (split them): " + ", ".join(f"{n} ({c})" for n, c in found.items())


def test_the_allow_lists_name_existing_modules_that_need_them():
    # A stale entry would let the module it names grow back unnoticed.
    for name in [*DECLARATIVE, *TO_SPLIT]:
        assert (ROOT / name).is_file(), f"{name} is allowed but does not exist"
    for name in TO_SPLIT:
        assert line_count(ROOT / name) > LIMIT, f"{name} is back under {LIMIT} lines: drop it from TO_SPLIT"


def test_the_check_sees_a_long_module(tmp_path):
    (tmp_path / "studio" / "app" / "migrations").mkdir(parents=True)
    (tmp_path / "studio" / "app" / "long.py").write_text("x = 1\n" * (LIMIT + 1), encoding="utf-8")
    (tmp_path / "studio" / "app" / "short.py").write_text("x = 1\n" * LIMIT, encoding="utf-8")
    (tmp_path / "studio" / "app" / "migrations" / "0001_initial.py").write_text("x = 1\n" * 2000, encoding="utf-8")
    assert oversized(tmp_path) == {"studio/app/long.py": LIMIT + 1}
