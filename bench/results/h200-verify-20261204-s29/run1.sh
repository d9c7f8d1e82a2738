#!/usr/bin/env bash
# Session 29, first device call: the whole GPU test binary at 9cd2cd5 (the
# non-power-of-two GQA packing, the head-dim-128 tile rule and 71a845d's review
# had only had their KV-cache / varlen / forward suites run), sanitizers on
# packed padded forward cases, then the Python tests on CUDA.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/s29a
xz -dc $D/B.so.xz > /tmp/B.so
xz -dc $D/flashattn_gpu_tests.xz > /tmp/gt; chmod +x /tmp/gt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/B.so
t0=$SECONDS
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $L/gpu.txt
timeout 330 /tmp/gt --gtest_brief=1 > $L/gpu-tests-all.log 2>&1; echo "gpu tests all rc=$? $(tail -3 $L/gpu-tests-all.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep -E '^\[  FAILED' $L/gpu-tests-all.log | head -20
F='*Forward*cuda_bf16_b*_q17_k113_h8x1_d128*:*Forward*cuda_f16_b*_q1_k*_h4x2_d64*:*KvCache*cuda*q16_h28x4*'
for tool in memcheck racecheck; do
  timeout 45 compute-sanitizer --tool $tool /tmp/gt --gtest_filter="$F" --gtest_brief=1 > $L/$tool.log 2>&1; echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/$tool.log | tail -1) $(grep -E 'PASSED|FAILED' $L/$tool.log | tail -1) t=$((SECONDS-t0))"
done
timeout $((585 - SECONDS + t0)) python3 -m pytest -q -x python/tests > $L/pytest.log 2>&1; echo "pytest rc=$? $(tail -1 $L/pytest.log) t=$((SECONDS-t0))"
cd $OUT && tar czf logs.tgz logs && rm -rf logs
