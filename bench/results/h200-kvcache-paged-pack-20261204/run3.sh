#!/usr/bin/env bash
# GQA packing for padded calls too (short queries on the per-sequence
# kernel): sanitizers on packed padded forward cases, chunked prefill through
# flash_attn_func with and without packing beside SDPA, the Python tests on
# CUDA, then the whole GPU test binary.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/final
xz -dc $D/B.so.xz > /tmp/B.so
xz -dc $D/flashattn_gpu_tests.xz > /tmp/gt; chmod +x /tmp/gt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
F='*Forward*cuda_bf16_b*_q17_k113_h8x1_d128*:*Forward*cuda_f16_b*_q1_k*_h4x2_d64*:*Forward*cuda_bf16_b*_q17_k113_h8x1_d256_causal*'
/tmp/gt --gtest_list_tests --gtest_filter="$F" | grep -c '^  ' | sed 's/^/sanitizer cases: /'
for tool in memcheck racecheck synccheck initcheck; do
  timeout 60 compute-sanitizer --tool $tool /tmp/gt --gtest_filter="$F" --gtest_brief=1 > $L/$tool.log 2>&1; echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $L/$tool.log | tail -1) $(grep -E 'PASSED|FAILED' $L/$tool.log | tail -1) t=$((SECONDS-t0))"
done
B="timeout 90 python3 bench/gpu/bench_kvcache_prefill.py --api func --chunks 1,16,32,64"
FLASHATTN_LIBRARY=/tmp/B.so $B $L/func-pack.csv --label func_pack > $L/func-pack.log 2>&1; echo "func pack rc=$? t=$((SECONDS-t0))"
FLASHATTN_LIBRARY=/tmp/B.so FLASHATTN_SM90_PACK_GQA=0 $B $L/func-nopack.csv --label func_nopack --impls flashattn > $L/func-nopack.log 2>&1; echo "func nopack rc=$? t=$((SECONDS-t0))"
FLASHATTN_LIBRARY=/tmp/B.so $B $L/func-pack-r2.csv --label func_pack --impls flashattn > $L/func-pack-r2.log 2>&1; echo "func pack r2 rc=$? t=$((SECONDS-t0))"
for f in $L/func-*.csv; do grep -v '^#' $f | cut -d, -f1-4,9,10; done
FLASHATTN_LIBRARY=/tmp/B.so timeout 150 python3 -m pytest -q python/tests > $L/pytest.log 2>&1; echo "pytest rc=$? $(tail -1 $L/pytest.log) t=$((SECONDS-t0))"
timeout $((580 - SECONDS + t0)) /tmp/gt --gtest_brief=1 > $L/gpu-tests-all.log 2>&1; echo "gpu tests all rc=$? $(tail -3 $L/gpu-tests-all.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep -E '^\[  FAILED' $L/gpu-tests-all.log | head -20
cd $OUT && tar czf logs.tgz logs && rm -rf logs
