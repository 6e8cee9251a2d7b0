"""`ruff check` and `ruff format --check` pass on the tree (pyproject.toml [tool.ruff]).

The same command runs in scripts/test.sh and `make test-fast`; this test makes a plain `pytest`
catch a lint error too, as tests/test_import_contracts.py does for the import contracts. The
rules are the ones that find mistakes (unused or undefined names, bugbear, a missing comma in a
list), and no line may pass 200 characters outside the generated migrations. The code is kept
as `ruff format` writes it (120 columns), so a diff shows only what changed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUFF = Path(sys.executable).with_name("ruff")


def ruff_check(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(RUFF), "check", "--no-cache", "--output-format", "concise", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_ruff_check_passes():
    run = ruff_check(".")
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]


def test_ruff_format_check_passes():
    run = subprocess.run(
        [str(RUFF), "format", "--no-cache", "--check", "."], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, "run `ruff format .`:\n" + run.stdout[-6000:] + run.stderr[-2000:]


def test_the_configuration_finds_what_it_is_for():
    # Read from stdin under a path of the tree, so the project's configuration applies.
    source = "import os\n\nTEXT = '" + "x" * 250 + "'\nNAMES = ['a' 'b', 'c']\n"
    run = ruff_check("--stdin-filename", "studio/example.py", "-", stdin=source)
    codes = {line.split(" ")[1] for line in run.stdout.splitlines() if ": " in line and line.startswith("studio/")}
    assert {"F401", "E501", "ISC004"} <= codes, run.stdout + run.stderr
    # A generated migration may hold long lines; nothing else is excused.
    run = ruff_check("--stdin-filename", "studio/saves/migrations/0099_example.py", "-", stdin=source)
    codes = {line.split(" ")[1] for line in run.stdout.splitlines() if ": " in line and line.startswith("studio/")}
    assert "E501" not in codes and "F401" in codes, run.stdout + run.stderr
