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

# Sanitizers: a second build folder (build-asan: CPU only, clang when present,
# -fsanitize=address,undefined, UB fatal) runs a representative subset of the
# CPU tests (all but the Small/ and Large/ shape sweeps and fp32 Features/:
# the full suite takes ~30 min under ASan on CI's 2 cores; the fp16/bf16
# Features/ sweep covers the same code paths), replays the fuzz corpus and
# fuzzes the C ABI for 60 s. Details, ASAN_OPTIONS and why: scripts/sanitize.sh.
if [ "${FLASHATTN_SANITIZE:-1}" != 0 ]; then
  "$root/scripts/sanitize.sh"
fi

if [ -x "$root/python/setup_env.sh" ]; then
  echo "== Python tests =="
  "$root/python/run_tests.sh" "$build"
fi
