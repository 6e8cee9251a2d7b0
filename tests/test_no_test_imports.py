"""No module under tests/ imports a test module (`test_*.py`, `*_test.py`) or a conftest.

Importing a test module runs its module body a second time under another name, collects its
tests twice when a name is re-exported, and ties one test file's helpers to another's edits;
importing a fixture that way shadows the registered one and hides where it comes from. Shared
helpers live in non-test modules (tests/support/, tests/fakes.py, tests/browser/pages.py, a
folder's *_support.py or scenario.py) and shared fixtures in tests/plugins/, registered once in
tests/conftest.py's `pytest_plugins`.

The scan reads the source (ast), so an import inside a function counts too, and relative imports
are resolved against the importing module's package.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
SKIP_PARTS = {"node_modules", "__pycache__"}


def is_test_module(name: str) -> bool:
    """A test module, or a conftest (its fixtures are registered by pytest; importing one shadows
    them, and its helpers belong in a support module)."""
    last = name.rsplit(".", 1)[-1]
    return last.startswith("test_") or last.endswith("_test") or last == "conftest"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(tree: ast.AST, importer: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, absolute module name) for every module an import statement may load, names included
    (`from tests.saves import test_rewind` loads `tests.saves.test_rewind`)."""
    package = importer if is_package else importer.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".") if package else []
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names if alias.name != "*"]
    return found


def imports_of_test_modules(root: Path = TESTS) -> list[str]:
    """Return "path:line imports module" for every import of a test module under `root` (a name
    that is a test module's file: `from studio.x import lore_key_test` imports a function)."""
    out = []
    for path in sorted(root.rglob("*.py")):
        if SKIP_PARTS & set(path.relative_to(root).parts):
            continue
        importer = module_name(path, root)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, name in imported_modules(tree, importer, path.name == "__init__.py"):
            if is_test_module(name) and (root.parent / (name.replace(".", "/") + ".py")).is_file():
                out.append(f"{path.relative_to(root.parent).as_posix()}:{line} imports {name}")
    return out


def test_no_module_under_tests_imports_a_test_module():
    found = imports_of_test_modules()
    assert not found, (
        "move the shared helper to a support module (tests/support/) or a plugin (tests/plugins/):\n" + "\n".join(found)
    )


def test_the_scan_sees_every_kind_of_import(tmp_path):
    root = tmp_path / "tests"
    (root / "saves").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "saves" / "__init__.py").write_text("")
    (root / "saves" / "test_a.py").write_text("X = 1\n")
    (root / "saves" / "helpers.py").write_text("Y = 2\nimport json\nfrom tests.saves.helpers2 import Z\n")
    (root / "saves" / "test_b.py").write_text(
        "from .test_a import X\n"  # 1: relative
        "from . import test_a\n"  # 2: a test module as a name
        "from tests.saves.test_a import X\n"  # 3: absolute
        "import tests.saves.test_a\n"  # 4: plain import
        "def f():\n"
        "    from ..saves.test_a import X\n"  # 6: inside a function, two levels up
        "from .helpers import Y\n"  # a support module: allowed
        "from tests.saves import helpers\n"  # allowed
        "import pytest\n"  # allowed
        "from tests.saves.helpers import test_like\n"  # a name, not a module: allowed
        "from .conftest import fixture_helper\n"  # 11: a conftest
    )
    (root / "saves" / "conftest.py").write_text("def fixture_helper(): pass\n")
    (root / "saves" / "latest_test.py").write_text("from json import loads\n")
    (root / "support.py").write_text("from tests.saves.latest_test import loads\n")
    found = imports_of_test_modules(root)
    assert sorted(found) == sorted(
        [
            "tests/saves/test_b.py:1 imports tests.saves.test_a",
            "tests/saves/test_b.py:2 imports tests.saves.test_a",
            "tests/saves/test_b.py:3 imports tests.saves.test_a",
            "tests/saves/test_b.py:4 imports tests.saves.test_a",
            "tests/saves/test_b.py:11 imports tests.saves.conftest",
            "tests/saves/test_b.py:6 imports tests.saves.test_a",
            "tests/support.py:1 imports tests.saves.latest_test",
        ]
    )
