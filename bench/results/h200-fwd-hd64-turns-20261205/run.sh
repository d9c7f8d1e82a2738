#!/usr/bin/env bash
# Head dim 64's three warpgroups taking turns on unmasked long calls (a kernel of its own,
# tile_rules.hpp hd64_turns_pay). N: the working tree (head dims 64 and 128, archs 90a),
# O: 26c4e70 built alike. N's head-dim-64 forward tests with the turns kernel forced on every
# padded 192-row call (FLASHATTN_SM90_PINGPONG3=1, FLASHATTN_SM90_HD64_BLOCKM=192), racecheck /
# synccheck on small cases so, then bench_peers head dim 64 forward N / O alternated, two rounds.
set -u
L=/tmp/l; mkdir -p $L/n $L/o; R=$OUT/t; mkdir -p $R
xz -dc build-lead/pp/turns.so.xz > $L/n/libflashattn.so.0
[ -f $L/o/libflashattn.so.0 ] || xz -dc build-lead/pp/old.so.xz > $L/o/libflashattn.so.0
xz -dc build-lead/pp/tests.xz > $L/t && chmod +x $L/t
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
F='*/Forward.*d64*:*KvCache*d64*:*VarlenForward*d64*:Edge/*'
FLASHATTN_SM90_PINGPONG3=1 FLASHATTN_SM90_HD64_BLOCKM=192 timeout 90 $L/t --gtest_brief=1 --gtest_filter="$F" > $R/tests-turns.log 2>&1
echo "tests-turns rc=$? $(grep -E '^\[  PASSED|^\[  FAILED|tests ran' $R/tests-turns.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep FAILED $R/tests-turns.log | head -5
S='Small/Forward.*d64*'
for tool in racecheck synccheck; do
  FLASHATTN_SM90_PINGPONG3=1 FLASHATTN_SM90_HD64_BLOCKM=192 timeout 40 compute-sanitizer --tool $tool --print-limit 10 \
    $L/t --gtest_brief=1 --gtest_filter="$S" > $R/san-$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/san-$tool.log | tail -1) $(grep -E '^\[  PASSED|^\[  FAILED' $R/san-$tool.log | tr '\n' ' ') t=$((SECONDS-t0))"
done
for r in 1 2; do
  for v in n o; do
    FLASHATTN_LIBRARY=$L/$v/libflashattn.so.0 timeout 40 python3 bench/gpu/bench_peers.py $R/d64-$v-r$r.csv --hdims 64 \
      --seqlens 2048,4096,8192,16384 --passes fwd --impls flashattn,sdpa_cudnn > $R/d64-$v-r$r.log 2>&1
    echo "r$r $v t=$((SECONDS-t0))"
  done
done
cd $OUT && tar czf t.tgz t && rm -rf t
