#!/usr/bin/env bash
# Second call: (1) the fp8 test rewritten for padded head dims (Fp8Invalid.HopperHeadDimsOffSixteen...:
# head dim 72 gives the bits of a caller-padded 80) and the fp8 sweep; (2) profile_pad.py: where the
# padded call's extra time goes (per-kernel device time; the pool's release threshold as the library
# leaves it and at 4 GiB). Same library as the first call (build-lead/s49/lib.xz); GPU tests rebuilt.
# On an H200 only, first: three bench_fp8.py processes (issue 9).
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt; cat $L/gpu.txt
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
xz -dc build-lead/s49/lib.xz > /tmp/lib.so; xz -dc build-lead/s49/gpu-tests.xz > /tmp/gt; chmod +x /tmp/gt
export FLASHATTN_LIBRARY=/tmp/lib.so
t0=$SECONDS
case "$name" in
  *H200*)
    for r in 0 1 2; do
      timeout 90 python3 bench/gpu/bench_fp8.py $L/fp8-r$r.csv > $L/fp8-r$r.log 2>&1; echo "fp8 run $r rc=$? t=$((SECONDS-t0))"
    done
    grep -h ',16384,' $L/fp8-r*.csv | head -30 ;;
  *) echo "not an H200: no fp8 benchmark" ;;
esac
timeout 100 /tmp/gt --gtest_filter='*Fp8*:*OddHeadDim*' --gtest_brief=1 > $L/tests-fp8.log 2>&1
echo "tests rc=$? t=$((SECONDS-t0))"; tail -2 $L/tests-fp8.log; grep -E '^\[  FAILED' $L/tests-fp8.log | head
D=bench/results/gpu-odd-head-dims-20261206/call2
timeout 90 python3 $D/profile_pad.py 0 > $L/profile-pool-default.log 2>&1; echo "profile rc=$? t=$((SECONDS-t0))"; cat $L/profile-pool-default.log
timeout 90 python3 $D/profile_pad.py 4096 > $L/profile-pool-4g.log 2>&1; echo "profile rc=$? t=$((SECONDS-t0))"; cat $L/profile-pool-4g.log
cd $OUT && tar czf logs.tgz logs && rm -rf logs
