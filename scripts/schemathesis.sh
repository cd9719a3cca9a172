#!/usr/bin/env bash
# Fuzz the REST API against its own OpenAPI schema with Schemathesis: a fresh SQLite
# database, the example project on 127.0.0.1, >= 1,000 requests, zero failures allowed.
# Options go to scripts/schemathesis.py (--max-examples, --seed, --keep).
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-.venv/bin/python}" scripts/schemathesis.py "$@"
