#!/usr/bin/env bash
# Fortieth session: the thirty-ninth session's head-dim-128 short-masked default
# (128-row tiles for causal/windowed calls of <= 1024 rows and keys) checked on
# the GPU: forward-side GPU tests with the default tiles, racecheck on small
# causal head-dim-128 cases, then bench_short_calls.py (kernel time) of this
# library (B) against fde45ae's (A, the same CUDA code as 3138e4a), ABAB.
# Inputs: build-lead/pp2/{lib,old-lib,tests,cli}.xz (build-pp at HEAD, archs 90a,
# head dims 64;128). Run from the repository root on the device; logs to $OUT.
set -uo pipefail
out=${OUT:-/tmp/out}; mkdir -p "$out" /tmp/new /tmp/old
xz -dc build-lead/pp2/lib.xz > /tmp/new/libflashattn.so.0.1.0
xz -dc build-lead/pp2/old-lib.xz > /tmp/old/libflashattn.so.0.1.0
xz -dc build-lead/pp2/tests.xz > /tmp/new/flashattn_gpu_tests; chmod +x /tmp/new/flashattn_gpu_tests
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
T=/tmp/new/flashattn_gpu_tests
echo "== forward-side GPU tests, default dispatch =="
timeout 240 $T --gtest_brief=1 --gtest_filter='Small/Forward.*:Large/Forward.*:ManyTiles/Forward.*:Features/Forward.*:HeadDimV/Forward.*:Edge/*:Sweep/KvCache.*:Sweep/VarlenForward.*:Small/Backward.*d128*causal*' > "$out/gpu-tests-fwd.log" 2>&1
echo "rc=$?"; grep -E "FAILED|Failure|^\[====|PASSED|SKIPPED \]" "$out/gpu-tests-fwd.log" | head -20
echo "== racecheck / synccheck, small causal head dim 128 =="
F='Small/Forward.*bf16_b1_q113_k113_h4x2_d128_causal:Small/Forward.*f16_b2_q113_k17_h2x2_d128_causal_bhsd:Large/Forward.*bf16*d128_causal*'
for tool in racecheck synccheck; do
  timeout 120 compute-sanitizer --tool $tool --print-limit 20 $T --gtest_brief=1 --gtest_filter="$F" > "$out/san-$tool.log" 2>&1
  echo "$tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^\[====|PASSED|FAILED" "$out/san-$tool.log" | head -5
done
echo "== bench_short_calls, hd128 causal fwd: A = fde45ae lib, B = this lib =="
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
for r in 1 2; do
  for v in old new; do
    FLASHATTN_LIBRARY=/tmp/$v/libflashattn.so.0.1.0 timeout 150 python3 bench/gpu/bench_short_calls.py \
      "$out/short-$v-r$r.csv" --pass fwd --hdims 128 --seqlens 512,1024,2048 --causal 1 > "$out/short-$v-r$r.log" 2>&1
    echo "$v r$r rc=$?"; grep -E "^flashattn|^sdpa" "$out/short-$v-r$r.csv" | cut -d, -f1-9
  done
done
