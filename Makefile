# Two commands: `make demo` and `make test`. Both create .venv on a fresh clone.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: demo test test-sqlite test-postgres lint typecheck docs clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

demo: $(STAMP)
	$(PY) manage.py migrate --noinput
	$(PY) manage.py agentmemory_demo
	$(PY) manage.py runserver 127.0.0.1:8000

## The whole suite, on SQLite (the embedded default) and then on PostgreSQL.
test: $(STAMP) lint test-sqlite test-postgres

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

clean:
	rm -rf $(VENV) site example_project/db.sqlite3 .pytest_cache .mypy_cache .ruff_cache
