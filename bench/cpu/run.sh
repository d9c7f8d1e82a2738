#!/usr/bin/env bash
# CPU benchmark, one run: ceilings, flashattn, naive OpenBLAS attention and
# PyTorch CPU SDPA on the same grid and thread count. Writes
# bench/results/cpu-<date>.csv and .png. Arguments go to both drivers
# (e.g. --hdims 128 --seqlens 2048,4096 --dtypes fp32).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
threads=${OMP_NUM_THREADS:-$(nproc)}
export OMP_NUM_THREADS=$threads
"$root/scripts/build.sh" >/dev/null
build=${FLASHATTN_BUILD_DIR:-$root/build}
"$root/python/setup_env.sh"  # .venv with numpy and torch from PyPI (the SDPA peer)
venv=${FLASHATTN_VENV:-${VIRTUAL_ENV:-$root/.venv}}  # the venv setup_env.sh made or found
"$venv/bin/python" -m pip install -q matplotlib
py="$venv/bin/python"
out="$root/bench/results/cpu-$(date +%Y%m%d-%H%M).csv"
mkdir -p "$root/bench/results"
{
  echo "# device: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $threads threads"
  echo "# date: $(date -u +%FT%TZ)  commit: $(git -C "$root" rev-parse --short HEAD)  torch: $($py -c 'import torch; print(torch.__version__)')"
  echo "# command: bench/cpu/run.sh $*"
  echo "# cpu path: FLASHATTN_CPU_ISA=${FLASHATTN_CPU_ISA:-unset (best: amx > avx512_bf16 on AMD > avx512 > avx2 > scalar)}"
  # The host is shared: the load average says how much the other jobs took.
  echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  "$build/bench/bench_cpu" "$@"
  "$py" "$root/bench/cpu/torch_sdpa.py" --threads "$threads" "$@" | grep -v '^#'
  echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out"
"$py" "$root/bench/cpu/plot.py" "$out" "${out%.csv}.png"
echo "wrote $out and ${out%.csv}.png"
