#!/usr/bin/env bash
# Two Q buffers in the Hopper forward (kernel_traits.cuh kQBufs): N = the working tree (head dims
# 64 and 128 built, archs 90a), O = 26c4e70 built alike (build-lead/pp/old.so.xz). One device call:
# N's forward-side GPU tests (every 16-bit head-dim-64/128 call forced onto 128-row tiles, then the
# default tiles), racecheck / synccheck on small cases, then kernel times N against O
# (bench_short_calls, causal, 512-4k, head dims 64 and 128; two alternated rounds) and bench_peers
# (forward, non-causal, 1k / 4k / 16k, flashattn only; two rounds); then ../h200-fwd-short-causal-ncu-20261205/run.sh.
set -u
L=/tmp/l; mkdir -p $L/n $L/o; R=$OUT/q; mkdir -p $R
xz -dc build-lead/pp/q2.so.xz > $L/n/libflashattn.so.0
[ -f $L/o/libflashattn.so.0 ] || xz -dc build-lead/pp/old.so.xz > $L/o/libflashattn.so.0
xz -dc build-lead/pp/tests.xz > $L/t && chmod +x $L/t
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
F='*/Forward.*:*Fp8Forward*:*KvCache*:*VarlenForward*:Edge/*'
FLASHATTN_SM90_HD128_BLOCKM=128 FLASHATTN_SM90_HD64_BLOCKM=128 timeout 120 $L/t --gtest_brief=1 --gtest_filter="$F" > $R/tests-128.log 2>&1
echo "tests-128 rc=$? $(grep -E '^\[  PASSED|^\[  FAILED|tests ran' $R/tests-128.log | tr '\n' ' ') t=$((SECONDS-t0))"
timeout 120 $L/t --gtest_brief=1 --gtest_filter="$F" > $R/tests-def.log 2>&1
echo "tests-def rc=$? $(grep -E '^\[  PASSED|^\[  FAILED|tests ran' $R/tests-def.log | tr '\n' ' ') t=$((SECONDS-t0))"
S='Small/Forward.*d64*:Small/Forward.*d128*'
for tool in racecheck synccheck; do
  FLASHATTN_SM90_HD128_BLOCKM=128 FLASHATTN_SM90_HD64_BLOCKM=128 timeout 60 compute-sanitizer --tool $tool --print-limit 10 \
    $L/t --gtest_brief=1 --gtest_filter="$S" > $R/san-$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/san-$tool.log | tail -1) $(grep -E '^\[  PASSED|^\[  FAILED' $R/san-$tool.log | tr '\n' ' ') t=$((SECONDS-t0))"
done
grep -E "FAILED" $R/tests-*.log | head -5
for r in 1 2; do
  for v in n o; do
    FLASHATTN_LIBRARY=$L/$v/libflashattn.so.0 timeout 60 python3 bench/gpu/bench_short_calls.py $R/short-$v-r$r.csv --pass fwd \
      --hdims 64,128 --seqlens 512,1024,2048,4096 --causal 1 > $R/short-$v-r$r.log 2>&1
    FLASHATTN_LIBRARY=$L/$v/libflashattn.so.0 timeout 60 python3 bench/gpu/bench_peers.py $R/nc-$v-r$r.csv --hdims 64,128 \
      --seqlens 1024,4096,16384 --causal 0 --passes fwd --impls flashattn > $R/nc-$v-r$r.log 2>&1
    echo "r$r $v t=$((SECONDS-t0))"
  done
done
(cd $OUT && tar czf q.tgz q && rm -rf q)
left=$((560 - SECONDS + t0)); echo "ncu gets ${left}s"
[ $left -gt 150 ] && timeout $left bash bench/results/h200-fwd-short-causal-ncu-20261205/run.sh
