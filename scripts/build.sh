#!/usr/bin/env bash
# Configures and builds flashattn (library, CLI, tests) into build/.
# CUDA kernels are built when nvcc is on PATH (FLASHATTN_CUDA=AUTO); pass
# extra CMake options as arguments, e.g. -DFLASHATTN_CUDA=OFF.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
build=${FLASHATTN_BUILD_DIR:-$root/build}
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release "$@"
elif [ $# -gt 0 ]; then
  cmake "$build" "$@"
fi
cmake --build "$build" -j "$(nproc)"
