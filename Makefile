# Two commands: `make demo` and `make test`. Both create .venv on a fresh clone: the demo
# installs the example project's extras only ([demo]), the tests everything ([dev]).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
HASH := $(shell cat pyproject.toml | cksum | cut -d' ' -f1)
STAMP := $(VENV)/.installed-$(HASH)
DEMO_STAMP := $(VENV)/.demo-$(HASH)
## Where the demo serves, and the address its printed links name: `make demo
## ADDR=127.0.0.1:8080` (or DEMO_ADDR in the environment).
DEMO_ADDR ?= 127.0.0.1:8000
ADDR ?= $(DEMO_ADDR)

.PHONY: demo test test-sqlite test-postgres lint typecheck docs bench bench-peers clean

# [dev] holds [demo]'s extras, so it stamps both.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-* $(VENV)/.demo-*
	touch $(STAMP) $(DEMO_STAMP)

$(DEMO_STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[demo]'
	rm -f $(VENV)/.demo-*
	touch $(DEMO_STAMP)

demo: export DEMO_ADDR := $(ADDR)
demo: $(DEMO_STAMP)
	$(PY) manage.py migrate --noinput
	$(PY) manage.py agentmemory_demo
	$(PY) manage.py runserver $(ADDR)

## The whole suite, on SQLite (the embedded default) and on PostgreSQL, both at once.
test: $(STAMP) lint typecheck
	PYTHON=$(PY) scripts/test_both.sh

test-sqlite: $(STAMP)
	AGENTMEMORY_TEST_DB=sqlite $(PY) -m pytest

test-postgres: $(STAMP)
	AGENTMEMORY_TEST_DB=postgres $(PY) -m pytest

lint: $(STAMP)
	$(PY) -m ruff check .

typecheck: $(STAMP)
	$(PY) -m mypy agentmemory

## The documentation site in site/ (open site/index.html); any warning fails the build.
DOCS_STAMP := $(VENV)/.docs-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

$(DOCS_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[docs]'
	rm -f $(VENV)/.docs-*
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(PY) -m mkdocs build --strict

## The benchmark suite (bench/run.py): writes docs/benchmarks.md and its SVG charts in
## docs/img/, in about 55 minutes on 2 cores, installs aside (the page states the last
## run's time). The peer libraries it compares with live in their own .venv-peers, never
## in .venv; if they cannot be installed, the page says so and the rest still runs.
BENCH_STAMP := $(VENV)/.bench-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
PEERS_VENV := .venv-peers
PEERS_STAMP := $(PEERS_VENV)/.installed-$(shell cat bench/peers/requirements.txt | cksum | cut -d' ' -f1)

$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	rm -f $(VENV)/.bench-*
	touch $(BENCH_STAMP)

$(PEERS_STAMP): bench/peers/requirements.txt
	test -x $(PEERS_VENV)/bin/python || $(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PEERS_VENV)/bin/python -m pip install --quiet -r bench/peers/requirements.txt
	rm -f $(PEERS_VENV)/.installed-*
	touch $(PEERS_STAMP)

bench-peers: $(PEERS_STAMP)

bench: $(BENCH_STAMP)
	-$(MAKE) --no-print-directory bench-peers
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) $(PEERS_VENV) site example_project/db.sqlite3 .pytest_cache .mypy_cache .ruff_cache
