#!/usr/bin/env bash
# Build the sdist and the wheel, `twine check` them, install the wheel with [all] into a
# fresh virtualenv outside the checkout, and run a smoke project against that copy:
# migrate, check, append and recall in Python, the admin and the API answering.
set -euo pipefail
cd "$(dirname "$0")/.."
checkout="$PWD"
PYTHON="$(realpath -s "${PYTHON:-.venv/bin/python}")"  # -s: keep the venv's own path
# Nothing may lead the new environment back to the checkout: the build leaves a
# django_agentmemory.egg-info there, which pip would take for an installed copy.
unset PYTHONPATH DJANGO_SETTINGS_MODULE
started=$SECONDS

work="$(mktemp -d "${TMPDIR:-/tmp}/agentmemory-wheel.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# The wheel is built from the sdist, so a file missing from the sdist fails here too.
"$PYTHON" -m build --outdir "$work/dist" . >"$work/build.log" 2>&1 \
  || { cat "$work/build.log"; exit 1; }
"$PYTHON" -m twine check --strict "$work"/dist/*

wheels=("$work"/dist/django_agentmemory-*.whl)
[ "${#wheels[@]}" -eq 1 ] || { echo "expected one wheel, got: ${wheels[*]}" >&2; exit 1; }
cd "$work"
"$PYTHON" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --no-compile "${wheels[0]}[all]" >"$work/pip.log" 2>&1 \
  || { cat "$work/pip.log"; exit 1; }
echo "built, checked and installed in $((SECONDS - started)) s"

mkdir "$work/project"
cp "$checkout"/scripts/wheel_smoke/*.py "$work/project/"
(cd "$work/project" && "$work/venv/bin/python" smoke.py)  # asserts agentmemory is the wheel's

echo "wheel smoke: ok in $((SECONDS - started)) s ($(basename "${wheels[0]}"))"
