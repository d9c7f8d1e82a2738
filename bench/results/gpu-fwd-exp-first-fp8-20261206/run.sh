#!/usr/bin/env bash
# The exponentials before the row max in the fp8 kernels only (FLASHATTN_SM90_EXP_FIRST=2).
# N: an sm_90a build of head dims 128 / 256 with -DFLASHATTN_SM90_DEFS=FLASHATTN_SM90_EXP_FIRST=2
# (build-lead/ab/n.so.xz, its GPU tests build-lead/ab/n-tests.xz); O: build-full of the same
# tree with the knob at its default 0 (build-lead/base/lib.xz). 1. N's fp8 tests (every
# Sweep/Fp8Forward case, the ramps among them) and racecheck / synccheck on small fp8 cases;
# 2. bench_fp8 (fp8 only; bf16 once from O as the ratio's base), head dims 128 / 256, 4k-16k,
# causal and not, N and O alternated N O O N N O O N. Also HEAD's tests of climbing / large logits. Run from the repository root with $OUT set.
set -u
L=/tmp/l; mkdir -p $L/n $L/o; R=$OUT/t; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $R/gpu.txt; cat $R/gpu.txt
xz -dc build-lead/ab/n.so.xz > $L/n/libflashattn.so.0
xz -dc build-lead/base/lib.xz > $L/o/libflashattn.so.0
xz -dc build-lead/ab/n-tests.xz > $L/t && chmod +x $L/t
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
sum() { echo "$1 rc=$2 $(grep -E '^\[  PASSED|^\[  FAILED|tests ran' $3 | tr '\n' ' ') t=$((SECONDS-t0))"; grep FAILED $3 | head -${4:-6}; }
timeout 90 $L/t --gtest_brief=1 --gtest_filter='Sweep/Fp8Forward.*:*Fp8*' > $R/tests-fp8.log 2>&1; sum tests-fp8 $? $R/tests-fp8.log
# HEAD's default kernels (build-lead/base/tests.xz) on the climbing-logits cases of the 43rd session.
xz -dc build-lead/base/tests.xz > $L/to && chmod +x $L/to
timeout 30 $L/to --gtest_brief=1 --gtest_filter='Edge/EdgeClimbingLogits.*:Edge/EdgeLargeLogits*' > $R/tests-o-edge.log 2>&1; sum tests-o-edge $? $R/tests-o-edge.log
S='Sweep/Fp8Forward.*d128*ramp*:Sweep/Fp8Forward.*d256*ramp*'
for tool in racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool --print-limit 10 $L/t --gtest_brief=1 --gtest_filter="$S" > $R/san-$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/san-$tool.log | tail -1) $(grep -E '^\[  PASSED|^\[  FAILED' $R/san-$tool.log | tr '\n' ' ') t=$((SECONDS-t0))"
done
FLASHATTN_LIBRARY=$L/o/libflashattn.so.0 timeout 60 python3 bench/gpu/bench_fp8.py $R/bf16-o.csv --hdims 128,256 \
  --seqlens 4096,8192,16384 --impls flashattn_bf16 --error-seqlen 0 > $R/bf16-o.log 2>&1; echo "bf16 t=$((SECONDS-t0))"
r=0
for v in n o o n n o o n; do
  r=$((r+1)); [ $((SECONDS - t0)) -lt 420 ] || break
  FLASHATTN_LIBRARY=$L/$v/libflashattn.so.0 timeout 60 python3 bench/gpu/bench_fp8.py $R/fp8-$r-$v.csv --hdims 128,256 \
    --seqlens 4096,8192,16384 --impls flashattn_fp8 --error-seqlen 0 > $R/fp8-$r-$v.log 2>&1
  echo "round $r $v rc=$? t=$((SECONDS-t0))"
done
FLASHATTN_LIBRARY=$L/n/libflashattn.so.0 timeout 60 python3 bench/gpu/bench_fp8.py $R/err-n.csv --hdims 128,256 \
  --seqlens 512 --causal 0 --impls flashattn_fp8 > $R/err-n.log 2>&1; echo "error report rc=$? t=$((SECONDS-t0))"
cd $OUT && tar czf t.tgz t && rm -rf t
