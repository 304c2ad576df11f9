# Quick start: `make run` serves the site with the demo data; `make test` runs every test.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
HOST ?= 127.0.0.1
PORT ?= 5000
PG_TEST_URL ?= postgresql+psycopg://postgres@127.0.0.1:5432/roft_test
# pytest options for both passes: by default each pass runs on two pytest-xdist workers (each
# worker gets its own PostgreSQL database: tests/conftest.py); `make test PYTEST_ARGS=` runs
# them in one process.
PYTEST_ARGS ?= -n 2
export FLASK_APP := wsgi.py

.PHONY: run test test-sqlite test-postgres fuzz-nightly lint format setup setup-dev services chromium nginx r axe demo screenshots clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip

$(VENV)/.stamp-site: requirements.txt | $(VENV)/bin/python
	$(VENV)/bin/pip install --quiet -r requirements.txt
	touch $@

# R first (order-only, so it holds under make -j too): rpy2 looks for R when pip installs it.
$(VENV)/.stamp-dev: requirements.txt requirements-research.txt requirements-dev.txt | $(VENV)/bin/python r
	$(VENV)/bin/pip install --quiet -r requirements-dev.txt
	touch $@ $(VENV)/.stamp-site

setup: $(VENV)/.stamp-site
setup-dev: $(VENV)/.stamp-dev

# axe-core, which the browser tests load into every page they check (needs Node.js and npm).
node_modules/.stamp-axe: package.json package-lock.json
	@command -v npm >/dev/null || { echo "npm is missing: install Node.js (the browser tests load axe-core from npm)"; exit 1; }
	npm ci --no-audit --no-fund --loglevel=error
	touch $@
axe: node_modules/.stamp-axe

## Serve the site with gunicorn on SQLite (instance/), loading the demo set into an empty database.
run: setup
	$(VENV)/bin/flask db upgrade
	$(VENV)/bin/flask load-demo --if-empty
	@echo ""
	@echo "  Real or Fake Text is running at http://$(HOST):$(PORT)  (Ctrl+C stops it)"
	@echo ""
	$(VENV)/bin/gunicorn --config gunicorn.conf.py --bind $(HOST):$(PORT) wsgi:app

## Lint, then the whole suite on SQLite and on PostgreSQL (installs what it needs first).
test: r setup-dev chromium nginx axe services lint test-sqlite test-postgres

test-sqlite: setup-dev axe
	$(PY) -m pytest -q $(PYTEST_ARGS)

test-postgres: setup-dev axe services
	TEST_DATABASE_URL=$(PG_TEST_URL) $(PY) -m pytest -q $(PYTEST_ARGS)

## The nightly-sized fuzzing run: 10^4 hypothesis cases on SQLite, then on PostgreSQL.
fuzz-nightly: setup-dev services
	ROFT_FUZZ_EXAMPLES=10000 $(PY) -m pytest -q tests/test_fuzz.py
	TEST_DATABASE_URL=$(PG_TEST_URL) ROFT_FUZZ_EXAMPLES=10000 $(PY) -m pytest -q tests/test_fuzz.py

lint: setup-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m pytest -q -p no:xdist -p no:cacheprovider tests/test_layering.py  # the layers (tests/layering.toml)

format: setup-dev
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

services:
	@bash scripts/ensure-services.sh

chromium:
	@bash scripts/ensure-chromium.sh

# nginx for the reverse-proxy test (tests/live/test_two_servers.py) and `web_load.py --proxy`.
nginx:
	@bash scripts/ensure-nginx.sh

# R with lme4 and lmerTest: the mixed models of analysis/mixed.py (through rpy2, which finds R
# when it is installed, so `make test` installs R first).
r:
	@bash scripts/ensure-r.sh

## Rebuild data/demo/examples.jsonl from the demo corpus.
demo: setup-dev
	$(PY) -m generation demo

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache node_modules
