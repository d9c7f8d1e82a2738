#!/usr/bin/env bash
# Runs the Python tests against a CMake build of libflashattn.
#   python/run_tests.sh [BUILD_DIR] [pytest args...]     (BUILD_DIR default: build)
# Uses the venv of python/setup_env.sh (created when missing; FLASHATTN_TORCH
# picks the torch install: full, lite or none). Set FLASHATTN_PYTHON to use an
# existing interpreter instead (e.g. on the GPU machine: FLASHATTN_PYTHON=python3).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
[ $# -gt 0 ] && shift
build=$(cd "$build" && pwd)
lib="$build/src/libflashattn.so"
[ -f "$lib" ] || lib=$(find "$build" -name 'libflashattn.so' -print -quit)
[ -n "$lib" ] && [ -f "$lib" ] || { echo "run_tests: no libflashattn.so under $build" >&2; exit 1; }

if [ -n "${FLASHATTN_PYTHON:-}" ]; then
  py=$FLASHATTN_PYTHON
else
  "$root/python/setup_env.sh"
  py=${FLASHATTN_VENV:-${VIRTUAL_ENV:-$root/.venv}}/bin/python
fi
export FLASHATTN_LIBRARY="$lib"
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"
cd "$root"
exec "$py" -m pytest python/tests -q "$@"
