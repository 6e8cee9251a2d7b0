# Axiom Studio — set-up, run and test on a fresh machine (Debian/Ubuntu, Python 3.11+).
#   make run    venv + installs, migrate, demo universe and save, a local Chroma server,
#               and the studio on http://127.0.0.1:8000
#   make test   venv + installs, services (Redis, PostgreSQL) when not running, the suite
#               on SQLite and (the tests that use the database) on PostgreSQL
#   make test-fast  the import contracts, `ruff check`, `ruff format --check` and the suite on SQLite without a browser, a Celery
#               worker or the real embedding model (markers browser, celery, slow), two workers
#   make hooks  the commit hook: ruff check, ruff format --check and lint-imports before each commit
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed

export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False

.PHONY: install run test test-fast bench clean-var hooks

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# torch first, pinned: an unpinned torch pulls a multi-GB CUDA build.
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

hooks:
	git config core.hooksPath scripts/git-hooks

run: install
	./scripts/run.sh

test: install
	./scripts/test.sh

# No services needed: SQLite in var/, the hashing embedder, eager jobs.
test-fast: install
	mkdir -p var
	PYTHONPATH="$(CURDIR)" $(VENV)/bin/lint-imports --no-cache --no-logo
	$(VENV)/bin/ruff check --no-cache --quiet .
	$(VENV)/bin/ruff format --no-cache --check --quiet .
	DJANGO_ALLOW_ASYNC_UNSAFE=true DATABASE_URL="sqlite:///$(CURDIR)/var/test-fast.sqlite3" \
		$(PY) -m pytest -p no:cacheprovider -q -n 2 --maxschedchunk 1 -m "not browser and not celery and not slow" $(ARGS)

bench: install
	./scripts/bench.sh

clean-var:
	rm -rf var
