#!/usr/bin/env bash
# Kept 80-row backward build (96119ef): the head-dim-128 backward grid beside the peers (three
# processes with the 80-row rule, FLASHATTN_SM90_BWD_TALL=1, each followed by one with 64-row steps,
# TALL=0, flashattn only), --check errors, then the whole backward test sweep with every unmasked
# call on 80 rows (TALL=2) and with the rule (TALL=1), and racecheck / synccheck / memcheck on small
# cases (TALL=2), the sweeps and sanitizers side by side on the GPU (correctness only).
set -u
D=build-lead/s33a
mkdir -p /tmp/w && xz -dc $D/lib.so.xz > /tmp/w/libflashattn.so.0
xz -dc $D/tests.xz > /tmp/w/t && xz -dc $D/cli.xz > /tmp/w/flashattn && chmod +x /tmp/w/t /tmp/w/flashattn
export LD_LIBRARY_PATH=/tmp/w PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/w/libflashattn.so.0
L=$OUT/r; mkdir -p $L; t0=$SECONDS
for r in 1 2 3; do
  FLASHATTN_SM90_BWD_TALL=1 timeout 90 python3 bench/gpu/bench_peers.py $L/peers-tall1-r$r.csv --hdims 128 --passes bwd > $L/peers-tall1-r$r.log 2>&1
  echo "r$r tall1 rc=$? t=$((SECONDS-t0))"
  FLASHATTN_SM90_BWD_TALL=0 timeout 60 python3 bench/gpu/bench_peers.py $L/peers-tall0-r$r.csv --hdims 128 --passes bwd --causal 0 --impls flashattn > $L/peers-tall0-r$r.log 2>&1
  echo "r$r tall0 rc=$? t=$((SECONDS-t0))"
done
(cd $OUT && tar czf r.tgz r)
for tall in 0 1; do for dt in bf16 fp16; do
  echo "-- check tall=$tall $dt"
  FLASHATTN_SM90_BWD_TALL=$tall timeout 20 /tmp/w/flashattn run --device cuda --backward --check --heads 8 --head-dim 128 --dtype $dt --repeat 1 --seqlen-q 1030 --seqlen-k 1030 2>&1 | grep -E "check  d[qkv]"
done; done > $L/check.log
cat $L/check.log
left=$((585 - SECONDS + t0)); echo "sweeps get ${left}s"
SAN='Small/Backward.*_b*_q113_k17_*d128*:Small/Backward.*_b*_q17_k113_*d128*:Small/Backward.*_q267_*d128*'
for tall in 2 1; do
  FLASHATTN_SM90_BWD_TALL=$tall timeout $left /tmp/w/t --gtest_brief=1 --gtest_filter='*Backward*' > $L/sweep-tall$tall.log 2>&1 &
done
for tool in racecheck synccheck memcheck; do
  FLASHATTN_SM90_BWD_TALL=2 timeout $left compute-sanitizer --tool $tool --print-limit 10 /tmp/w/t --gtest_brief=1 --gtest_filter="$SAN" > $L/san-$tool.log 2>&1 &
done
wait
for f in $L/sweep-*.log $L/san-*.log; do echo "== $f"; grep -E "FAILED|^\[====|PASSED|ERROR SUMMARY|RACECHECK SUMMARY" $f | tail -6; done
echo "t=$((SECONDS-t0))"
(cd $OUT && rm -f r.tgz && tar czf r.tgz r)
