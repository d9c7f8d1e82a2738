#!/usr/bin/env bash
# wgmma descriptors advanced on their low word everywhere (wgmma.cuh desc_advance; before, only the
# 80-row backward did, through desc_advance_lo). Library N (this change) against O (96119ef),
# alternated, two rounds: bench_peers, flashattn only, the whole grid (head dims 64 / 128 / 256,
# forward and backward, causal and not). Then the whole GPU test binary of N in three parts side by
# side (backward, forward, the rest).
set -u
mkdir -p /tmp/n /tmp/o
xz -dc build-lead/s33d/lib.so.xz > /tmp/n/libflashattn.so.0 && xz -dc build-lead/s33d/old.so.xz > /tmp/o/libflashattn.so.0
xz -dc build-lead/s33d/tests.xz > /tmp/n/t && chmod +x /tmp/n/t
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
L=$OUT/r; mkdir -p $L; t0=$SECONDS
for r in 1 2; do
  for v in n o; do
    FLASHATTN_LIBRARY=/tmp/$v/libflashattn.so.0 timeout 120 python3 bench/gpu/bench_peers.py $L/grid-$v-r$r.csv --impls flashattn > $L/grid-$v-r$r.log 2>&1
    echo "r$r $v rc=$? nan=$(grep -c nan $L/grid-$v-r$r.csv) t=$((SECONDS-t0))"
  done
done
(cd $OUT && tar czf r.tgz r)
left=$((585 - SECONDS + t0)); echo "tests get ${left}s"
timeout $left /tmp/n/t --gtest_brief=1 --gtest_filter='*Backward*' > $L/tests-bwd.log 2>&1 &
timeout $left /tmp/n/t --gtest_brief=1 --gtest_filter='*Forward*' > $L/tests-fwd.log 2>&1 &
timeout $left /tmp/n/t --gtest_brief=1 --gtest_filter='-*Backward*:*Forward*' > $L/tests-rest.log 2>&1 &
wait
for f in $L/tests-*.log; do echo "== $f"; grep -E "FAILED|^\[====|PASSED" $f | tail -8; done
echo "t=$((SECONDS-t0))"
(cd $OUT && rm -f r.tgz && tar czf r.tgz r)
