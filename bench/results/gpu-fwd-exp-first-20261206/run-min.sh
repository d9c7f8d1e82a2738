#!/usr/bin/env bash
# run.sh cut to the last ~150 s of device budget: N's head-dim-128 tests on 192-row tiles
# (fp8 sweep, climbing logits, small bf16 forwards), the mutant, and N / O alternated twice on
# bench_fp8 head dim 128, 8k and 16k non-causal (fp8 and bf16 on 192 rows).
set -u
L=/tmp/l; mkdir -p $L/n $L/o; R=$OUT/t; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $R/gpu.txt; cat $R/gpu.txt
xz -dc build-lead/ab/new.so.xz > $L/n/libflashattn.so.0
xz -dc build-lead/base/lib.xz > $L/o/libflashattn.so.0
xz -dc build-lead/ab/tests.xz > $L/t && chmod +x $L/t
xz -dc build-lead/ab/mutant-tests.xz > $L/m && chmod +x $L/m
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
sum() { echo "$1 rc=$2 $(grep -E '^\[  PASSED|^\[  FAILED|tests ran' $3 | tr '\n' ' ') t=$((SECONDS-t0))"; grep FAILED $3 | head -${4:-6}; }
F='Sweep/Fp8Forward.*d128*:Edge/EdgeClimbingLogits.*:Small/Forward.*bf16*d128*:Small/Forward.*f16*d128*'
FLASHATTN_SM90_HD128_BLOCKM=192 timeout 50 $L/t --gtest_brief=1 --gtest_filter="$F" > $R/tests-192.log 2>&1; sum tests-192 $? $R/tests-192.log
FLASHATTN_SM90_HD128_BLOCKM=192 timeout 20 $L/m --gtest_brief=1 \
  --gtest_filter='Edge/EdgeClimbingLogits.*cuda*:Sweep/Fp8Forward.*ramp*' > $R/tests-mutant.log 2>&1
sum mutant $? $R/tests-mutant.log 10
for r in 1 2; do
  for v in n o; do
    FLASHATTN_LIBRARY=$L/$v/libflashattn.so.0 timeout 20 python3 bench/gpu/bench_fp8.py $R/fp8-$v-r$r.csv --hdims 128 \
      --seqlens 8192,16384 --causal 0 --impls flashattn_bf16,flashattn_fp8 --error-seqlen 0 > $R/fp8-$v-r$r.log 2>&1
    echo "r$r $v t=$((SECONDS-t0))"
  done
done
cd $OUT && tar czf t.tgz t && rm -rf t
