#!/usr/bin/env bash
# Device call 1: fp8 head dim 128, P through shared memory (intra-warpgroup overlap at 192 rows).
set -x
L=/tmp/l; mkdir -p $L $OUT/logs
for f in build-lead/c1/*.xz; do xz -dc $f > $L/$(basename $f .xz); done
chmod +x $L/gpu_tests_Psmem
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > $OUT/logs/gpu.txt
for o in fp8base fp8psmem; do cuobjdump -sass $L/$o.o > $OUT/logs/$o.sass 2>&1; grep -c -E "STL|LDL" $OUT/logs/$o.sass; done
timeout 200 $L/gpu_tests_Psmem --gtest_brief=1 --gtest_filter='*Fp8*' > $OUT/logs/fp8-tests-psmem.log 2>&1; echo rc=$?
grep -E "FAILED|^\[====|PASSED" $OUT/logs/fp8-tests-psmem.log | head -20
for tool in racecheck synccheck; do
  timeout 90 compute-sanitizer --tool $tool --print-limit 10 $L/gpu_tests_Psmem --gtest_brief=1 \
    --gtest_filter='Sweep/Fp8Forward.*q113_k267_h4x2_d128*:Sweep/Fp8Forward.*q267_k113_h3x1_d128*' > $OUT/logs/san-$tool.log 2>&1
  tail -n 3 $OUT/logs/san-$tool.log
done
for r in 1 2; do for V in Base128 Ovl Psmem; do
  FLASHATTN_LIBRARY=$L/lib$V.so timeout 100 python3 bench/gpu/bench_fp8.py $OUT/logs/fp8-$V-r$r.csv --hdims 128 \
    --seqlens 2048,8192,16384 --impls flashattn_fp8,flashattn_bf16 --error-seqlen 0 2>&1 | grep -v "^#" | grep fp8
done; done
cd $OUT && tar czf logs.tgz logs
