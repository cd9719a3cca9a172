#!/usr/bin/env bash
# Fuzz the REST API against its own OpenAPI schema with Schemathesis: all checks, stateful
# links, a fixed and a random seed, the example project under gunicorn (2 workers) on a
# fresh PostgreSQL database, >= 3,000 requests, zero failures allowed.
# Options go to scripts/schemathesis.py (--max-examples, --seed, --random-seed, --workers,
# --keep).
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-.venv/bin/python}" scripts/schemathesis.py "$@"
