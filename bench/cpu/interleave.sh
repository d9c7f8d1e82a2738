#!/usr/bin/env bash
# The side-by-side CPU run for a shared, loaded host: flashattn and PyTorch CPU
# SDPA timed shape by shape, one right after the other, for several rounds, so
# that both see the same load (run.sh times the whole grid for one, then for
# the other, minutes apart). No naive attention and no ceilings (run.sh has
# them). Writes bench/results/cpu-interleaved-<date>.csv in run.sh's columns;
# bench/cpu/summarize.py takes the median over the rounds.
#   bench/cpu/interleave.sh [--rounds 3] [--seqlens 2048,4096,8192] [bench_cpu args]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
threads=${OMP_NUM_THREADS:-$(nproc)}
export OMP_NUM_THREADS=$threads
rounds=3
seqlens=2048,4096,8192
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --seqlens) seqlens=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
"$root/scripts/build.sh" >/dev/null
build=${FLASHATTN_BUILD_DIR:-$root/build}
"$root/python/setup_env.sh"
py="${FLASHATTN_VENV:-${VIRTUAL_ENV:-$root/.venv}}/bin/python"  # the venv setup_env.sh made or found
out="$root/bench/results/cpu-interleaved-$(date +%Y%m%d-%H%M).csv"
mkdir -p "$root/bench/results"
{
  echo "# device: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $threads threads"
  echo "# date: $(date -u +%FT%TZ)  commit: $(git -C "$root" rev-parse --short HEAD)  torch: $($py -c 'import torch; print(torch.__version__)')"
  echo "# command: bench/cpu/interleave.sh --rounds $rounds --seqlens $seqlens ${args[*]}"
  echo "# cpu path: FLASHATTN_CPU_ISA=${FLASHATTN_CPU_ISA:-unset (best: amx > avx512_bf16 on AMD > avx512 > avx2 > scalar)}"
  echo "impl,pass,dtype,hdim,seqlen,causal,batch,heads,threads,median_ms,min_ms,max_ms,gflops"
  for r in $(seq 1 "$rounds"); do
    for s in ${seqlens//,/ }; do
      echo "# round $r seqlen $s load average $(cut -d' ' -f1-3 /proc/loadavg)"
      "$build/bench/bench_cpu" --seqlens "$s" --no-naive --no-ceilings "${args[@]}" 2>/dev/null | { grep -v '^#\|^impl\|^hdim' || true; }
      "$py" "$root/bench/cpu/torch_sdpa.py" --threads "$threads" --seqlens "$s" "${args[@]}" 2>/dev/null | { grep -v '^#\|^impl\|^hdim' || true; }
    done
  done
} | tee "$out"
echo "wrote $out"
