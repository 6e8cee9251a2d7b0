#!/usr/bin/env bash
# Run the whole suite on SQLite, then the tests that use the database on PostgreSQL. Exit non-zero when a test fails or
# when no test ran. Called by `make test` (after the venv is set up) and by .ci/run.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/services.sh

PY=${PY:-.venv/bin/python}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ANONYMIZED_TELEMETRY=False
export DJANGO_ALLOW_ASYNC_UNSAFE=true
mkdir -p test-artifacts

# Browser tests drive Debian's chromium (never a downloaded browser build).
if [ ! -x /usr/bin/chromium ]; then
  _apt_install chromium || echo "warning: no /usr/bin/chromium; browser tests will fail" >&2
fi

# axe-core for the browser tests' accessibility checks: installed from tests/browser's
# package-lock.json, injected into pages by Playwright, never served by the studio.
if [ ! -f tests/browser/node_modules/axe-core/axe.min.js ]; then
  command -v npm >/dev/null || _apt_install npm || echo "warning: no npm; the axe checks will fail" >&2
  (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error) || echo "warning: npm ci failed in tests/browser" >&2
fi

# The import contracts (pyproject.toml [tool.importlinter]; docs/architecture.md "Layers"):
# static, so they run first and fail the run on their own.
echo "=== import contracts ==="
PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}" "$(dirname "$PY")/lint-imports" --no-cache --no-logo || {
  echo "import contracts broken: SOME SUITES FAILED" >&2; exit 1; }

# Lint (pyproject.toml [tool.ruff]): static too.
echo "=== ruff check ==="
"$(dirname "$PY")/ruff" check --no-cache . || { echo "ruff check failed: SOME SUITES FAILED" >&2; exit 1; }
echo "=== ruff format --check ==="
"$(dirname "$PY")/ruff" format --no-cache --check . || { echo "ruff format --check failed (run ruff format .): SOME SUITES FAILED" >&2; exit 1; }

services_start || exit 1
trap services_stop EXIT

PG_URL=${TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/axiom}

run_suite() {
  local label=$1; shift
  local report="test-artifacts/junit-$label.xml"
  echo "=== test suite on $label ==="
  "$PY" -m pytest -p no:cacheprovider --junitxml="$report" "$@"
  local rc=$?
  if [ $rc -eq 5 ]; then echo "no tests ran on $label: failing" >&2; return 1; fi
  if [ $rc -ne 0 ]; then return $rc; fi
  # Guard against a run that "passed" with nothing executed (all skipped or deselected).
  "$PY" - "$report" <<'PYEOF' || return 1
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suites = [root] if root.tag == "testsuite" else list(root)
ran = sum(int(s.get("tests", 0)) - int(s.get("skipped", 0)) for s in suites)
if ran <= 0:
    sys.exit(f"no tests executed in {sys.argv[1]}")
print(f"{ran} tests executed")
PYEOF
}

# Two workers by default (the machine CI runs on has 2 cores; every worker has its own
# database, var dir and Chroma store). AXIOM_TEST_WORKERS=0 runs in one process; an explicit
# -n in the arguments wins.
WORKERS=()
# Tests go to the workers one at a time (--maxschedchunk 1): tests/conftest.py puts the long
# ones (browser, celery, slow) first, so each worker starts on a long test and the short ones
# fill in around them, instead of one worker receiving the first few hundred tests in one chunk.
case " $* " in *" -n "*|*" -n="*|*" --numprocesses"*) ;; *) [ "${AXIOM_TEST_WORKERS:-2}" != 0 ] && WORKERS=(-n "${AXIOM_TEST_WORKERS:-2}" --maxschedchunk 1) ;; esac
set -- "${WORKERS[@]}" "$@"

status=0
DATABASE_URL="sqlite:///$(pwd)/var/test-sqlite.sqlite3" run_suite sqlite "$@" || status=1
# On PostgreSQL only the tests that use the database run (`--db-only`, tests/conftest.py): the
# rest (pure engine, embeddings, lexical search, parsing, subprocess checks) never open a
# connection, gave their answer in the SQLite run above, and would give the same one here.
# pytest's summary line says how many were deselected.
DATABASE_URL="$PG_URL" run_suite postgresql --db-only "$@" || status=1
echo
if [ $status -eq 0 ]; then echo "ALL SUITES PASSED"; else echo "SOME SUITES FAILED"; fi
exit $status
