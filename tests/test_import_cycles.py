"""The `studio` package has no import cycle, counting every import a module can execute.

Each module's imports are read with `ast`, not by importing it: module-level imports and
imports inside functions both count (a function-level import only defers the cycle to the
first call, it does not remove it); imports under `if TYPE_CHECKING:` do not (they never
run). Relative imports are resolved against the importing module; `from pkg import name` is
an edge to the module `pkg.name` when there is one, else to `pkg` (its `__init__`).
Importing `a.b.c` also runs the packages `a` and `a.b`, so they are edges too, except the
importing module's own ancestors: those are already being imported when it runs (a package
whose `__init__` re-exports its submodules is no cycle). A module asking its own package's
`__init__` for a name (`from studio.memory.jobs import x` inside the jobs package) is an
edge, because that `__init__` may not have defined the name yet.

On failure the message lists one shortest cycle per group of modules that import each other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "studio"


def module_files(root: Path = ROOT, package: str = PACKAGE) -> dict[str, Path]:
    """{dotted module name: file} for every module of `package` (migrations included)."""
    modules = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(node: ast.AST):
    """Yield every Import / ImportFrom under `node`, skipping `if TYPE_CHECKING:` bodies."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for other in child.orelse:  # the `else:` of a TYPE_CHECKING test does run
                if isinstance(other, (ast.Import, ast.ImportFrom)):
                    yield other
                else:
                    yield from _import_nodes(other)
        else:
            yield from _import_nodes(child)


def _base(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    if not is_package:
        parts.pop()  # a module's relative imports start from its package
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of the package that `module` imports (resolved to the deepest module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def resolve(name: str) -> str | None:
        while name and name not in modules:  # `studio.x.func` -> `studio.x`
            name = name.rpartition(".")[0]
        return name or None

    for node in _import_nodes(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = _base(module, is_package, node)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        for target in targets:
            resolved = resolve(target)
            if resolved and resolved != module:
                found.add(resolved)
            while resolved := resolved and resolved.rpartition(".")[0]:
                if resolved != module and not module.startswith(resolved + "."):  # run on the way
                    found.add(resolved)
    return found


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    modules = module_files(root, package)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def components(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other (Tarjan's strongly connected components
    with more than one module), each sorted. Recursive: the depth is at most the number of
    modules, far below Python's limit for a package this size."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for child in sorted(graph.get(node, ())):
            if child not in index:
                visit(child)
                low[node] = min(low[node], low[child])
            elif child in stack:
                low[node] = min(low[node], index[child])
        if low[node] == index[node]:
            group = stack[stack.index(node) :]
            del stack[stack.index(node) :]
            if len(group) > 1:
                groups.append(sorted(group))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return sorted(groups)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest cycle per component, as [a, b, ..., a]."""
    return [_one_cycle(graph, set(component)) for component in components(graph)]


def _one_cycle(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle through the component's first module (breadth-first)."""
    start = min(component)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & component):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [*reversed(path), start]
                if child not in parents:
                    parents[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle in component {sorted(component)}")


def test_studio_has_no_import_cycle():
    graph = import_graph()
    found = components(graph)
    assert not found, "import cycles in studio/:\n" + "\n".join(
        f"{' -> '.join(_one_cycle(graph, set(group)))}\n    (all of: {', '.join(group)})" for group in found
    )


# -- the checker itself --------------------------------------------------------------------


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize(
    "files, expected",
    [
        pytest.param(  # a function-level import still closes the cycle
            {"pkg/__init__.py": "", "pkg/a.py": "from pkg import b\n", "pkg/b.py": "def f():\n    import pkg.a\n"},
            [["pkg.a", "pkg.b", "pkg.a"]],
            id="function-level",
        ),
        pytest.param(  # relative imports are resolved; `from . import x` is the module x
            {
                "pkg/__init__.py": "",
                "pkg/sub/__init__.py": "",
                "pkg/sub/a.py": "from . import b\n",
                "pkg/sub/b.py": "from ..c import thing\n",
                "pkg/c.py": "from .sub.a import x\n",
            },
            [["pkg.c", "pkg.sub.a", "pkg.sub.b", "pkg.c"]],
            id="relative",
        ),
        pytest.param(  # TYPE_CHECKING imports never run ...
            {
                "pkg/__init__.py": "",
                "pkg/a.py": "import pkg.b\n",
                "pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import A\n",
            },
            [],
            id="type-checking",
        ),
        pytest.param(  # ... but the else branch of a TYPE_CHECKING test does
            {
                "pkg/__init__.py": "",
                "pkg/a.py": "import pkg.b\n",
                "pkg/b.py": "import typing\nif typing.TYPE_CHECKING:\n    pass\nelse:\n    from pkg.a import A\n",
            },
            [["pkg.a", "pkg.b", "pkg.a"]],
            id="type-checking-else",
        ),
        pytest.param(  # an __init__ re-exporting its submodules, which import each other: no cycle
            {
                "pkg/__init__.py": "",
                "pkg/jobs/__init__.py": "from pkg.jobs.runner import run\n",
                "pkg/jobs/runner.py": "import pkg.jobs.ledger\nfrom pkg.jobs import ledger\n",
                "pkg/jobs/ledger.py": "",
            },
            [],
            id="own-package",
        ),
        pytest.param(  # a name taken from the module's own package __init__ is an edge
            {
                "pkg/__init__.py": "",
                "pkg/jobs/__init__.py": "from pkg.jobs.runner import run\nLIMIT = 3\n",
                "pkg/jobs/runner.py": "from . import LIMIT\n",
            },
            [["pkg.jobs", "pkg.jobs.runner", "pkg.jobs"]],
            id="name-from-own-package",
        ),
        pytest.param(  # importing a submodule runs its package: a cycle through an __init__
            {
                "pkg/__init__.py": "",
                "pkg/jobs/__init__.py": "from pkg.jobs.runner import run\n",
                "pkg/jobs/runner.py": "from pkg.saves import rewind\n",
                "pkg/jobs/ledger.py": "",
                "pkg/saves.py": "from pkg.jobs.ledger import claim\n",
            },
            [["pkg.jobs", "pkg.jobs.runner", "pkg.saves", "pkg.jobs"]],
            id="through-package-init",
        ),
        pytest.param(  # a name from a module is an edge to that module, not beyond
            {"pkg/__init__.py": "", "pkg/a.py": "from pkg.b import f\n", "pkg/b.py": "import os\ndef f(): pass\n"},
            [],
            id="acyclic",
        ),
    ],
)
def test_the_checker_finds_exactly_the_cycles(tmp_path, files, expected):
    write(tmp_path, files)
    assert cycles(import_graph(tmp_path, "pkg")) == expected
