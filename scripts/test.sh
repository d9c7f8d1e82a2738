#!/usr/bin/env bash
# Builds everything (installing what is missing) and runs every test that
# this machine can run: the C++ suite through ctest (the `gpu` label only
# when a CUDA device is visible) and the Python suite through pytest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
build=${FLASHATTN_BUILD_DIR:-$root/build}

label=(-LE gpu)
if "$build/tools/flashattn" info | grep -q "backends: cpu, cuda"; then label=(); fi
echo "== C++ tests (ctest ${label[*]:-all}) =="
ctest --test-dir "$build" --output-on-failure "${label[@]}" -j "$(nproc)"

if [ -x "$root/python/setup_env.sh" ]; then
  echo "== Python tests =="
  "$root/python/run_tests.sh" "$build"
fi
