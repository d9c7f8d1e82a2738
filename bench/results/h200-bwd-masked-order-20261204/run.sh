#!/usr/bin/env bash
# Causal backward: key tiles of 2^g kv heads interleaved in the grid (longest tiles of 2^g heads
# first) for the non-deterministic path, FLASHATTN_SM90_BWD_MASKED_INTERLEAVE_LOG2 = g = 0 (before),
# 2, 3, 4, alternated, two rounds, flashattn only (bench_peers, causal backward grid, head dims
# 64 / 128 / 256); then the causal backward tests with g = 2 and 4 (correctness).
set -u
mkdir -p /tmp/w && xz -dc build-lead/s33b/lib.so.xz > /tmp/w/libflashattn.so.0
xz -dc build-lead/s33a/tests.xz > /tmp/w/t && chmod +x /tmp/w/t
export LD_LIBRARY_PATH=/tmp/w PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/w/libflashattn.so.0
L=$OUT/r; mkdir -p $L; t0=$SECONDS
for r in 1 2; do
  for g in 0 2 3 4; do
    FLASHATTN_SM90_BWD_MASKED_INTERLEAVE_LOG2=$g timeout 60 python3 bench/gpu/bench_peers.py $L/g$g-r$r.csv --passes bwd --causal 1 --impls flashattn > $L/g$g-r$r.log 2>&1
    echo "r$r g$g rc=$? t=$((SECONDS-t0))"
  done
done
for g in 2 4; do
  FLASHATTN_SM90_BWD_MASKED_INTERLEAVE_LOG2=$g timeout 200 /tmp/w/t --gtest_brief=1 --gtest_filter='*Backward*causal*:*Backward*window*' > $L/tests-g$g.log 2>&1 &
done
wait
for g in 2 4; do echo "tests g$g: $(grep -E '^\[====|PASSED|FAILED' $L/tests-g$g.log | tail -3 | tr '\n' ' ')"; done
echo "t=$((SECONDS-t0))"
cd $OUT && tar czf r.tgz r
