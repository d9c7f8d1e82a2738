#!/usr/bin/env bash
# DESIGN.md's grid at HEAD's kernels, only on an H200 (the README's H200 grid predates the
# thirty-ninth session's kernels; the forty-second session measured the same grid on an H100:
# bench/results/h100-peers-20261205-head/). Five bench_peers.py processes back to back
# (flashattn / SDPA FA2 / SDPA cuDNN, bf16, fwd and bwd, head dims 64 / 128 / 256), grid_median.py,
# then two bench_fp8.py processes. On any other card: the GPU test sweep of HEAD's test binary
# instead (default dispatch), so that the call is not wasted. Library and tests: build-full at 08cf439
# (sm_90a, every head dim) carried as build-lead/new/{lib,tests}.xz. Run from the repository
# root with $OUT set; everything comes back as logs.tgz.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt; cat $L/gpu.txt
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_COMMIT=08cf439
t0=$SECONDS
case "$name" in
*H200*)
  xz -dc build-lead/new/lib.xz > /tmp/libflashattn.so; export FLASHATTN_LIBRARY=/tmp/libflashattn.so
  for r in 0 1 2 3 4; do
    [ $((SECONDS - t0)) -lt 420 ] || break
    timeout 150 python3 bench/gpu/bench_peers.py $L/peers-r$r.csv > $L/peers-r$r.log 2>&1; echo "peers run $r rc=$? t=$((SECONDS-t0))"
  done
  for r in 0 1; do
    [ $((SECONDS - t0)) -lt 510 ] || break
    timeout 80 python3 bench/gpu/bench_fp8.py $L/fp8-r$r.csv > $L/fp8-r$r.log 2>&1; echo "fp8 run $r rc=$? t=$((SECONDS-t0))"
  done
  python3 bench/gpu/grid_median.py $L/peers-r*.csv > $L/grid-median.md 2>&1; echo "median rc=$?"
  ;;
*)
  echo "not an H200: the GPU test sweep instead"
  xz -dc build-lead/new/tests.xz > /tmp/t && chmod +x /tmp/t
  timeout ${SWEEP_T:-400} /tmp/t --gtest_brief=1 > $L/gpu-sweep.log 2>&1; echo "sweep rc=$? t=$((SECONDS-t0))"
  grep -E "^\[  FAILED|^\[  PASSED|SKIPPED \]|tests ran" $L/gpu-sweep.log | head -20
  ;;
esac
cd $OUT && tar czf logs.tgz logs && rm -rf logs
