#!/usr/bin/env bash
# Build the sdist and the wheel, `twine check` them, install the wheel with [all] into a
# fresh virtualenv outside the checkout, and run a smoke project against that copy:
# migrate, check, append and recall in Python, the admin and the API answering.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
started=$SECONDS

work="$(mktemp -d "${TMPDIR:-/tmp}/agentmemory-wheel.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# The wheel is built from the sdist, so a file missing from the sdist fails here too.
"$PYTHON" -m build --outdir "$work/dist" . >"$work/build.log" 2>&1 \
  || { cat "$work/build.log"; exit 1; }
"$PYTHON" -m twine check --strict "$work"/dist/*

wheels=("$work"/dist/django_agentmemory-*.whl)
[ "${#wheels[@]}" -eq 1 ] || { echo "expected one wheel, got: ${wheels[*]}" >&2; exit 1; }
"$PYTHON" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet "${wheels[0]}[all]" >"$work/pip.log" 2>&1 \
  || { cat "$work/pip.log"; exit 1; }
echo "built, checked and installed in $((SECONDS - started)) s"

mkdir "$work/project"
cp scripts/wheel_smoke/*.py "$work/project/"
# Run from the project directory with a clean path: agentmemory comes from the wheel.
(cd "$work/project" && env -u PYTHONPATH -u DJANGO_SETTINGS_MODULE \
  "$work/venv/bin/python" smoke.py)

echo "wheel smoke: ok in $((SECONDS - started)) s ($(basename "${wheels[0]}"))"
