#!/usr/bin/env bash
# 80-row backward steps: the key-end mask only in the CTAs whose key tile reaches past the keys'
# end (a copy of the consumer of its own), so the other CTAs' loop drops its 40 selects (SASS 684
# -> 640 instructions, no local memory). Library N (this change) against O (96119ef), alternated:
# bench_peers (head dim 128 backward, non-causal, flashattn only) three rounds, and the CLI at
# 16k x 16 heads, two rounds; then the head-dim-128 backward tests with every unmasked call on 80
# rows (TALL=2) and under the rule, racecheck on small cases with key tails, side by side.
set -u
mkdir -p /tmp/n /tmp/o
xz -dc build-lead/s33e/lib.so.xz > /tmp/n/libflashattn.so.0 && xz -dc build-lead/s33e/old.so.xz > /tmp/o/libflashattn.so.0
xz -dc build-lead/s33e/tests.xz > /tmp/n/t && xz -dc build-lead/s33e/cli.xz > /tmp/n/flashattn && chmod +x /tmp/n/t /tmp/n/flashattn
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
L=$OUT/r; mkdir -p $L; t0=$SECONDS
for r in 1 2 3; do
  for v in n o; do
    FLASHATTN_LIBRARY=/tmp/$v/libflashattn.so.0 timeout 60 python3 bench/gpu/bench_peers.py $L/nc-$v-r$r.csv --hdims 128 --passes bwd --causal 0 --impls flashattn > $L/nc-$v-r$r.log 2>&1
    echo "r$r $v rc=$? nan=$(grep -c nan $L/nc-$v-r$r.csv) t=$((SECONDS-t0))"
  done
done
for r in 1 2; do
  for v in n o; do
    echo "cli r$r $v :: $(LD_LIBRARY_PATH=/tmp/$v timeout 30 /tmp/n/flashattn run --device cuda --backward --heads 16 --seqlen-q 16384 --batch 1 --head-dim 128 --dtype bf16 --repeat 20 2>&1 | grep -E '^backward')"
  done
done | tee $L/cli.log
(cd $OUT && tar czf r.tgz r)
left=$((585 - SECONDS + t0)); echo "tests get ${left}s"
SAN='Small/Backward.*_b*_q113_k17_*d128*:Small/Backward.*_b*_q17_k113_*d128*:Small/Backward.*_q267_*d128*'
FLASHATTN_SM90_BWD_TALL=2 timeout $left /tmp/n/t --gtest_brief=1 --gtest_filter='*Backward*d128*:*Edge*Backward*' > $L/tests-tall2.log 2>&1 &
FLASHATTN_SM90_BWD_TALL=1 timeout $left /tmp/n/t --gtest_brief=1 --gtest_filter='*Backward*d128*:*Edge*Backward*' > $L/tests-tall1.log 2>&1 &
FLASHATTN_SM90_BWD_TALL=2 timeout $left compute-sanitizer --tool racecheck --print-limit 10 /tmp/n/t --gtest_brief=1 --gtest_filter="$SAN" > $L/san-racecheck.log 2>&1 &
FLASHATTN_SM90_BWD_TALL=2 timeout $left compute-sanitizer --tool memcheck --print-limit 10 /tmp/n/t --gtest_brief=1 --gtest_filter="$SAN" > $L/san-memcheck.log 2>&1 &
wait
for f in $L/tests-*.log $L/san-*.log; do echo "== $f"; grep -E "FAILED|^\[====|PASSED|ERROR SUMMARY|RACECHECK SUMMARY" $f | tail -8; done
echo "t=$((SECONDS-t0))"
(cd $OUT && rm -f r.tgz && tar czf r.tgz r)
