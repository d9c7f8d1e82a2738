#!/usr/bin/env bash
# Whole-binary GPU regression of HEAD (bf7978b, CUDA code of 3bdc98f): every
# CUDA kernel built for sm_90a at head dims 64/96/128/192/256
# (`FLASHATTN_BUILD_DIR=build-full ./scripts/build.sh -DFLASHATTN_CUDA=ON
# -DFLASHATTN_CUDA_ARCHS=90a`), the GPU test binary, the Python tests on CUDA,
# racecheck / synccheck on the bf16 267 x 267 forward and backward cases of
# every head dim, and the CLI's --check on a few shapes. The last whole-binary
# run was 2026-12-04 (h200-kvcache-paged-pack-20261204/run3); seven commits
# since then changed src/cuda (80-row backward steps, three-warpgroup turns,
# the single-warpgroup tile option, short masked head-dim-128 tiles).
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/full
xz -dc $D/lib.xz > /tmp/libflashattn.so
xz -dc $D/gpu_tests.xz > /tmp/gt; chmod +x /tmp/gt
xz -dc $D/cli.xz > /tmp/fa; chmod +x /tmp/fa
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/libflashattn.so
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > $L/gpu.txt 2>&1; cat $L/gpu.txt
timeout 330 /tmp/gt --gtest_brief=1 > $L/gpu-tests-all.log 2>&1; echo "gpu tests rc=$? $(tail -3 $L/gpu-tests-all.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep -E '^\[  FAILED' $L/gpu-tests-all.log | head -30
timeout 120 python3 -m pytest -q python/tests > $L/pytest.log 2>&1; echo "pytest rc=$? $(tail -1 $L/pytest.log) t=$((SECONDS-t0))"
grep -E 'FAILED|Error' $L/pytest.log | head -10
F='Large/Forward.*cuda_bf16_b1_q267_k267*:Large/Backward.*cuda_bf16_b1_q267_k267*'
for tool in racecheck synccheck; do
  timeout 50 compute-sanitizer --tool $tool /tmp/gt --gtest_filter="$F" --gtest_brief=1 > $L/$tool.log 2>&1; echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/$tool.log | tail -1) $(grep -E 'tests ran|PASSED|FAILED' $L/$tool.log | tr '\n' ' ') t=$((SECONDS-t0))"
done
for a in "--dtype bf16 --causal --backward" "--dtype bf16 --head-dim 256 --backward" "--dtype bf16 --head-dim 64 --causal --backward" "--dtype e4m3" "--dtype bf16 --seqlen-q 1 --seqlen-k 8192 --heads 64 --heads-kv 8"; do
  timeout 30 /tmp/fa run --device cuda --seqlen-q 1030 --heads 8 --check $a --repeat 3 >> $L/cli-check.log 2>&1 || echo "cli rc=$? for $a" >> $L/cli-check.log
done
grep -iE 'check|error|fail' $L/cli-check.log | head -30; echo "cli t=$((SECONDS-t0))"
