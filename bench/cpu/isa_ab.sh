#!/usr/bin/env bash
# A/B of the CPU backend's SIMD paths on one machine: bench_cpu run once per
# (round, path), the paths alternated within each round so that all see the
# same host load. Writes bench/results/cpu-isa-ab-<date>.csv (bench_cpu's
# columns plus the path); the summary prints, per shape, each path's GFLOP/s
# in every round, its median and best, and both against the first path
# (ab_summary.py).
#   bench/cpu/isa_ab.sh [--rounds 3] [--isas avx512,avx512_bf16] [bench_cpu args]
# (e.g. --hdims 64,128,256 --seqlens 2048 --dtypes bf16 --causal 0,1 --repeat 3)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
rounds=3
isas=avx512,avx512_bf16
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --isas) isas=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
build=${FLASHATTN_BUILD_DIR:-$root/build}
[ -x "$build/bench/bench_cpu" ] || "$root/scripts/build.sh" >/dev/null
out="$root/bench/results/cpu-isa-ab-$(date +%Y%m%d-%H%M).csv"
mkdir -p "$root/bench/results"
{
  echo "# device: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs) ($(grep -m1 vendor_id /proc/cpuinfo | cut -d: -f2 | xargs)), $OMP_NUM_THREADS threads"
  echo "# date: $(date -u +%FT%TZ)  commit: $(git -C "$root" rev-parse --short HEAD)"
  echo "# command: bench/cpu/isa_ab.sh --rounds $rounds --isas $isas ${args[*]}"
  echo "isa,round,impl,pass,dtype,hdim,seqlen,causal,batch,heads,threads,median_ms,min_ms,max_ms,gflops"
  for r in $(seq 1 "$rounds"); do
    for isa in ${isas//,/ }; do
      echo "# round $r $isa load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
      FLASHATTN_CPU_ISA=$isa "$build/bench/bench_cpu" --no-naive --no-ceilings "${args[@]}" 2>/dev/null |
        { grep -v '^#\|^impl' || true; } | sed "s/^/$isa,$r,/"
    done
  done
} > "$out"
echo "wrote $out" >&2
python3 "$root/bench/cpu/ab_summary.py" "$out"
