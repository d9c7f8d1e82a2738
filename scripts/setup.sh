#!/usr/bin/env bash
# Installs what building and testing flashattn needs, when it is missing.
# Debian/Ubuntu packages through apt-get (as root, or with sudo). Idempotent.
set -euo pipefail

pkgs=()
have() { command -v "$1" >/dev/null 2>&1; }
have cmake || pkgs+=(cmake)
have g++ || pkgs+=(g++)
have ninja || pkgs+=(ninja-build)
have python3 || pkgs+=(python3 python3-venv)
[ -f /usr/include/gtest/gtest.h ] || pkgs+=(libgtest-dev)
[ -f /usr/include/benchmark/benchmark.h ] || pkgs+=(libbenchmark-dev)
# OpenBLAS only for bench_cpu's naive baseline, found where bench/CMakeLists.txt
# looks (a netlib cblas.h elsewhere in /usr/include satisfied an older check,
# and bench_cpu was then silently not built). Optional: a failed install
# warns and the build goes on without bench_cpu.
opt=()
[ -f /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h ] || [ -f /usr/include/openblas/cblas.h ] || opt+=(libopenblas-dev)

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
if [ ${#pkgs[@]} -gt 0 ] || [ ${#opt[@]} -gt 0 ]; then
  echo "setup: installing ${pkgs[*]} ${opt[*]}"
  $SUDO apt-get update -qq || [ ${#pkgs[@]} -eq 0 ]
fi
if [ ${#pkgs[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${pkgs[@]}" >/dev/null
fi
if [ ${#opt[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${opt[@]}" >/dev/null ||
    echo "setup: could not install ${opt[*]}; bench_cpu (the CPU benchmark's naive baseline) will not be built"
fi

# CMake >= 3.25 is required.
ver=$(cmake --version | head -1 | awk '{print $3}')
if [ "$(printf '%s\n3.25\n' "$ver" | sort -V | head -1)" != "3.25" ]; then
  echo "setup: cmake $ver is older than 3.25; installing a newer one from PyPI"
  python3 -m pip install -q "cmake>=3.25"
fi
