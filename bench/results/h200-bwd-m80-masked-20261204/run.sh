#!/usr/bin/env bash
# 80-row backward steps for masked calls (causal, windows): the per-query mask in a copy of the step
# of its own, run only on steps whose tile is not full. Library N (this change) against O (96119ef,
# build-lead/s33c/old.so.xz), alternated: causal head-dim-128 backward grid with N on 80 rows for every call
# (TALL=2) and on 64 (TALL=0), O on 64; non-causal with N and O under the rule (TALL=1; N's unmasked
# steps lost the key-end FSELs). Then the backward tests with every eligible call on 80 rows (TALL=2)
# and racecheck / memcheck on small masked cases, side by side.
set -u
mkdir -p /tmp/n /tmp/o
xz -dc build-lead/s33c/lib.so.xz > /tmp/n/libflashattn.so.0 && xz -dc build-lead/s33c/old.so.xz > /tmp/o/libflashattn.so.0
xz -dc build-lead/s33c/tests.xz > /tmp/n/t && xz -dc build-lead/s33c/cli.xz > /tmp/n/flashattn && chmod +x /tmp/n/t /tmp/n/flashattn
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
L=$OUT/r; mkdir -p $L; t0=$SECONDS
B="python3 bench/gpu/bench_peers.py --hdims 128 --passes bwd --impls flashattn"
for r in 1 2 3; do
  for v in N2 N0 O0; do
    lib=/tmp/n; [ ${v:0:1} = O ] && lib=/tmp/o
    FLASHATTN_LIBRARY=$lib/libflashattn.so.0 FLASHATTN_SM90_BWD_TALL=${v:1:1} timeout 60 $B $L/causal-$v-r$r.csv --causal 1 > $L/causal-$v-r$r.log 2>&1
    echo "r$r causal $v rc=$? t=$((SECONDS-t0))"
  done
  for v in N1 O1; do
    lib=/tmp/n; [ ${v:0:1} = O ] && lib=/tmp/o
    FLASHATTN_LIBRARY=$lib/libflashattn.so.0 FLASHATTN_SM90_BWD_TALL=${v:1:1} timeout 60 $B $L/nc-$v-r$r.csv --causal 0 > $L/nc-$v-r$r.log 2>&1
    echo "r$r noncausal $v rc=$? t=$((SECONDS-t0))"
  done
done
(cd $OUT && tar czf r.tgz r)
[ "${BENCH_ONLY:-0}" = 1 ] && exit 0
export LD_LIBRARY_PATH=/tmp/n
for dt in bf16 fp16; do for m in "--causal" "--window-left 300 --window-right 40"; do
  echo "-- check TALL=2 $dt $m"
  FLASHATTN_SM90_BWD_TALL=2 timeout 20 /tmp/n/flashattn run --device cuda --backward --check --heads 8 --head-dim 128 --dtype $dt --repeat 1 --seqlen-q 1030 --seqlen-k 1100 $m 2>&1 | grep -E "check  d[qkv]"
done; done > $L/check.log 2>&1
cat $L/check.log
left=$((585 - SECONDS + t0)); echo "tests get ${left}s"
SAN='Small/Backward.*_q113_k17_*d128_causal*:Small/Backward.*_q17_k113_*d128_causal*:Small/Backward.*_q267_*d128*causal*:*Backward*d128*window*'
FLASHATTN_SM90_BWD_TALL=2 timeout $left /tmp/n/t --gtest_brief=1 --gtest_filter='*Backward*' > $L/sweep-tall2.log 2>&1 &
FLASHATTN_SM90_BWD_TALL=1 timeout $left /tmp/n/t --gtest_brief=1 --gtest_filter='*Backward*d128*' > $L/sweep-tall1-d128.log 2>&1 &
for tool in racecheck memcheck; do
  FLASHATTN_SM90_BWD_TALL=2 timeout $left compute-sanitizer --tool $tool --print-limit 10 /tmp/n/t --gtest_brief=1 --gtest_filter="$SAN" > $L/san-$tool.log 2>&1 &
done
wait
for f in $L/sweep-*.log $L/san-*.log; do echo "== $f"; grep -E "FAILED|^\[====|PASSED|ERROR SUMMARY|RACECHECK SUMMARY" $f | tail -8; done
echo "t=$((SECONDS-t0))"
(cd $OUT && rm -f r.tgz && tar czf r.tgz r)
