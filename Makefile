# Axiom Studio — set-up, run and test on a fresh machine (Debian/Ubuntu, Python 3.11+).
#   make run    venv + installs, migrate, demo universe and save, a local Chroma server,
#               and the studio on http://127.0.0.1:8000
#   make test   venv + installs, services (Redis, PostgreSQL) when not running, the suite
#               on SQLite and on PostgreSQL
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed

export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False

.PHONY: install run test test-fast bench clean-var

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# torch first, pinned: an unpinned torch pulls a multi-GB CUDA build.
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

run: install
	./scripts/run.sh

test: install
	./scripts/test.sh

bench: install
	./scripts/bench.sh

clean-var:
	rm -rf var
