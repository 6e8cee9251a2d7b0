"""The import contracts of pyproject.toml ([tool.importlinter]) hold: `lint-imports` passes.

The same command runs in scripts/test.sh (the README's `make test`); this test makes
`pytest` (and so `make test-fast`) catch a broken contract too. The contracts
(docs/architecture.md, "Layers"): proxy > api | inspector > saves > universes > memory >
world, with no exception; the lore activation and retrieval cores and the embedder free of
Django; the job ledger importing no job handler.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def run_lint_imports() -> subprocess.CompletedProcess:
    # This checkout's `studio`, whichever checkout the virtualenv was installed from.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_import_contracts_are_kept():
    run = run_lint_imports()
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"][
        "contracts"
    ]
    assert f"Contracts: {len(contracts)} kept, 0 broken." in run.stdout


def test_the_contracts_cover_the_layers_and_the_django_free_cores():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    by_id = {contract["id"]: contract for contract in config["contracts"]}
    assert by_id["layers"]["layers"] == [
        "studio.proxy",
        "studio.api | studio.inspector",
        "studio.saves",
        "studio.universes",
        "studio.memory",
        "studio.world",
    ]
    # Nothing crosses the layers upwards, not even a model import: the rows are the world app's (issue 34).
    assert "ignore_imports" not in by_id["layers"]
    assert "ignore_imports" not in by_id["job-ledger"]
    cores = by_id["django-free-cores"]
    assert {"studio.memory.lore_activation", "studio.memory.retrieval"} <= set(cores["source_modules"])
    assert "django" in cores["forbidden_modules"] and not cores.get("allow_indirect_imports")
