#!/usr/bin/env bash
# Nsight Compute profile of the Hopper backward kernel on one shape (issue 6):
# speed of light, warp states, pipe utilisation, and the per-SASS-instruction
# stall samples (where the warps wait), so that a change to the kernel is
# aimed at a measured stall rather than a guess.
#   FLASHATTN_BUILD_DIR=... [FA_NCU_HDIM=128] bench/sm90/bwd_ncu.sh [seqlen] [extra flashattn-run flags]
# (DESIGN.md's grid: 16k tokens, hidden 2048 = heads x head dim.)
# Needs the `flashattn` CLI in $build/tools. Output in $OUT:
#   bwd-ncu.txt (sections), bwd-ncu-sass.csv (source page, SASS with stall columns).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${FLASHATTN_BUILD_DIR:-$root/build-sm90bwd}
out=${OUT:-/tmp/fa_out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$build/src${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
seqlen=${1:-16384}
shift || true
batch=$((16384 / seqlen))
[ "$batch" -ge 1 ] || batch=1
hdim=${FA_NCU_HDIM:-128}
cmd=("$build/tools/flashattn" run --device cuda --backward --batch "$batch" --heads $((2048 / hdim))
     --head-dim "$hdim" --seqlen-q "$seqlen" --repeat 1 --warmup 1 "$@")
echo "# ${cmd[*]}"
# --clock-control none: the clocks the benchmark sees (ncu's default locks
# them at base). Only the main kernel (not the pre/postprocess) is profiled.
timeout 240 ncu --clock-control none -k regex:bwd_kernel -c 1 --set full --import-source yes \
  -f -o "$out/bwd-ncu" "${cmd[@]}" > "$out/bwd-ncu-run.log" 2>&1
echo "ncu rc=$?"
tail -n 3 "$out/bwd-ncu-run.log"
ncu --import "$out/bwd-ncu.ncu-rep" --print-details all > "$out/bwd-ncu.txt" 2>&1
ncu --import "$out/bwd-ncu.ncu-rep" --page source --print-source sass --csv > "$out/bwd-ncu-sass.csv" 2>&1
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|DRAM Throughput|Issue Slots Busy|No Eligible|Active Warps Per|Eligible Warps|Shared Memory|Tensor|L2 Hit|Registers Per|Warp Cycles Per Issued" \
  "$out/bwd-ncu.txt" | head -n 40
python3 "$root/bench/sm90/ncu_stalls.py" "$out/bwd-ncu-sass.csv" 20 | tee "$out/bwd-ncu-stalls.txt"
grep -A 24 "Section: Warp State Statistics" "$out/bwd-ncu.txt" | grep -E "Stall|Warp Cycles" | head -n 12
