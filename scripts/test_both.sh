#!/usr/bin/env bash
# The whole suite on SQLite and on PostgreSQL at once, each in its own process with its
# own Redis databases (SQLite: 15 and 14, PostgreSQL: 11 and 10), so neither run's cache,
# broker or workers see the other's: both at once keep CI short on two cores, since much
# of each run waits on a server, a worker or a browser. Each run's output is kept in a
# file and printed when it ends, so the two never interleave; the script fails when
# either run fails. The PostgreSQL run leaves out the tests that cannot reach a database
# (AGENTMEMORY_TEST_DATABASE_ONLY=1, tests/conftest.py): they run the same on either, and
# the SQLite run has them. Arguments go to both pytest runs.
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
logs="$(mktemp -d "${TMPDIR:-/tmp}/agentmemory-tests.XXXXXX")"
trap 'rm -rf "$logs"' EXIT

AGENTMEMORY_TEST_DB=sqlite "$PY" -m pytest -p no:cacheprovider "$@" >"$logs/sqlite" 2>&1 &
sqlite=$!
AGENTMEMORY_TEST_DB=postgres AGENTMEMORY_TEST_DATABASE_ONLY=1 \
  AGENTMEMORY_TEST_REDIS="${AGENTMEMORY_TEST_REDIS_PG:-redis://127.0.0.1:6379/11}" \
  AGENTMEMORY_TEST_BROKER="${AGENTMEMORY_TEST_BROKER_PG:-redis://127.0.0.1:6379/10}" \
  "$PY" -m pytest -p no:cacheprovider "$@" >"$logs/postgres" 2>&1 \
  || [ $? -eq 5 ] &  # 5: nothing selected reaches a database, and SQLite ran it all
postgres=$!

failed=0
report() {  # report NAME PID WHAT: wait for it, then print its whole output
  if wait "$2"; then status=passed; else status=FAILED; failed=1; fi
  echo "=================== $3: $status ==================="
  cat "$logs/$1"
}
report sqlite "$sqlite" "the suite on sqlite"
# AFTER_SQLITE: a shell command started once the SQLite run (the shorter) has ended,
# beside the PostgreSQL run, which waits on servers and workers more than it computes.
# .ci/run starts the wheel smoke and the fuzz there. It fails the script when it fails.
if [ -n "${AFTER_SQLITE:-}" ]; then
  bash -c "$AFTER_SQLITE" >"$logs/after" 2>&1 &
  after=$!
fi
report postgres "$postgres" "the suite on postgres"
if [ -n "${AFTER_SQLITE:-}" ]; then
  report after "$after" "AFTER_SQLITE ($AFTER_SQLITE)"
fi
exit "$failed"
