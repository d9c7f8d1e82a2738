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
[ -f /usr/include/x86_64-linux-gnu/openblas64-pthread/cblas.h ] || [ -f /usr/include/x86_64-linux-gnu/cblas.h ] || [ -f /usr/include/cblas.h ] || pkgs+=(libopenblas-dev)

if [ ${#pkgs[@]} -gt 0 ]; then
  echo "setup: installing ${pkgs[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${pkgs[@]}" >/dev/null
fi

# CMake >= 3.25 is required.
ver=$(cmake --version | head -1 | awk '{print $3}')
if [ "$(printf '%s\n3.25\n' "$ver" | sort -V | head -1)" != "3.25" ]; then
  echo "setup: cmake $ver is older than 3.25; installing a newer one from PyPI"
  python3 -m pip install -q "cmake>=3.25"
fi
