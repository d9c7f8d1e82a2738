#!/usr/bin/env bash
# Forty-fifth session, first device call. (1) The climbing-logits edge test at head dims 64 /
# 128 / 192 / 256 (44e91d3: the forty-fourth session ran it on the CPU only) through the GPU
# kernels, plus racecheck on its head-dim-64 and -256 cases. (2) Only on an H200: DESIGN.md's
# grid at HEAD's kernels (five bench_peers.py processes: flashattn / SDPA FA2 / SDPA cuDNN, bf16,
# fwd and bwd, head dims 64 / 128 / 256), grid_median.py, then two bench_fp8.py processes.
# Library and tests: build-full at HEAD (sm_90a, every head dim) carried as
# build-lead/new/{lib,tests}.xz. Run from the repository root with $OUT set; logs.tgz comes back.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt; cat $L/gpu.txt
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_COMMIT=${FLASHATTN_COMMIT:-unknown}
t0=$SECONDS
xz -dc build-lead/new/tests.xz > /tmp/t && chmod +x /tmp/t
xz -dc build-lead/new/lib.xz > /tmp/libflashattn.so; export FLASHATTN_LIBRARY=/tmp/libflashattn.so
timeout 120 /tmp/t --gtest_filter='Edge/EdgeClimbingLogits.*' > $L/climb.log 2>&1; echo "climb rc=$? t=$((SECONDS-t0))"
grep -E "^\[  FAILED|^\[  PASSED|SKIPPED \]|tests ran" $L/climb.log | head
timeout 120 compute-sanitizer --tool racecheck /tmp/t --gtest_filter='Edge/EdgeClimbingLogits.*cuda*d64*:Edge/EdgeClimbingLogits.*cuda*d256*' > $L/climb-racecheck.log 2>&1
echo "racecheck rc=$? t=$((SECONDS-t0))"; grep -E "ERROR SUMMARY|PASSED|FAILED" $L/climb-racecheck.log | tail -3
case "$name" in
*H200*)
  for r in 0 1 2 3 4; do
    [ $((SECONDS - t0)) -lt 430 ] || break
    timeout 150 python3 bench/gpu/bench_peers.py $L/peers-r$r.csv > $L/peers-r$r.log 2>&1; echo "peers run $r rc=$? t=$((SECONDS-t0))"
  done
  for r in 0 1; do
    [ $((SECONDS - t0)) -lt 520 ] || break
    timeout 60 python3 bench/gpu/bench_fp8.py $L/fp8-r$r.csv > $L/fp8-r$r.log 2>&1; echo "fp8 run $r rc=$? t=$((SECONDS-t0))"
  done
  python3 bench/gpu/grid_median.py $L/peers-r*.csv > $L/grid-median.md 2>&1; echo "median rc=$?"
  ;;
*) echo "not an H200: no grid" ;;
esac
cd $OUT && tar czf logs.tgz logs && rm -rf logs
