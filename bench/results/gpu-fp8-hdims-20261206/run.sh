#!/usr/bin/env bash
# Forty-fifth session: the fp8 forward at every head dim that is a multiple of 16 up to 256 (on
# the 128 and 256 tiles, zero-filled past head_dim). (1) Every Fp8 case of the GPU test binary,
# the new head dims 16 / 96 / 112 / 192 / 208 among them; (2) compute-sanitizer memcheck on the
# head-dim 96 / 112 / 208 / 16 cases (the V transpose's partial 64-row blocks); (3) the Python
# fp8 tests on CUDA; (4) two bench_fp8.py processes at head dims 64 / 96 / 192 (and 128 for
# reference): fp8 / our bf16 / cuDNN bf16 and the error report. Library and tests: build-full
# (sm_90a, every head dim) carried as build-lead/new/{lib,tests}.xz. Run from the repository
# root with $OUT set; logs.tgz comes back.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt; cat $L/gpu.txt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_COMMIT=${FLASHATTN_COMMIT:-unknown}
t0=$SECONDS
xz -dc build-lead/new/tests.xz > /tmp/t && chmod +x /tmp/t
xz -dc build-lead/new/lib.xz > /tmp/libflashattn.so; export FLASHATTN_LIBRARY=/tmp/libflashattn.so
timeout 150 /tmp/t --gtest_filter='*Fp8*' > $L/fp8-tests.log 2>&1; echo "fp8 tests rc=$? t=$((SECONDS-t0))"
grep -E "^\[  FAILED|^\[  PASSED|SKIPPED \]|tests ran" $L/fp8-tests.log | head -20
timeout 150 compute-sanitizer --tool memcheck /tmp/t --gtest_filter='*Fp8Forward*cuda*_d96_*:*Fp8Forward*cuda*_d112_*:*Fp8Forward*cuda*_d208_*:*Fp8Forward*cuda*_d16_*' > $L/fp8-memcheck.log 2>&1
echo "memcheck rc=$? t=$((SECONDS-t0))"; grep -E "ERROR SUMMARY|PASSED|FAILED" $L/fp8-memcheck.log | tail -3
timeout 120 python3 -m pytest -q python/tests/test_fp8.py > $L/pytest-fp8.log 2>&1; echo "pytest rc=$? t=$((SECONDS-t0))"; tail -2 $L/pytest-fp8.log
for r in 0 1; do
  timeout 100 python3 bench/gpu/bench_fp8.py $L/fp8-hdims-r$r.csv --hdims 64,96,128,192 --seqlens 1024,4096,16384 > $L/fp8-hdims-r$r.log 2>&1
  echo "bench_fp8 run $r rc=$? t=$((SECONDS-t0))"
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
