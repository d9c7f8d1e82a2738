#!/usr/bin/env bash
# Session 19, device call 1: the KV-cache extras (rotary, leftpad, batch idx) on the H200.
set -u
O=$OUT/logs; mkdir -p $O
xz -dc build-lead/c1/libflashattn.so.xz > /tmp/libB.so
xz -dc build-lead/c1/gpu_tests.xz > /tmp/gpu_tests; chmod +x /tmp/gpu_tests
export FLASHATTN_LIBRARY=/tmp/libB.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/device.txt
echo "== GPU tests: KV cache (incl. rope / leftpad / idx), KV invalid args, varlen =="
F='*KvCache*:*KvInvalid*:*Varlen*'
timeout 200 /tmp/gpu_tests --gtest_brief=1 --gtest_filter="$F" > $O/gpu-kvcache.log 2>&1; echo "rc=$?"
grep -E "FAILED|Failure|^\[====|PASSED|SKIPPED \]" $O/gpu-kvcache.log | head -30
echo "== sanitizers on the new KV-cache cases =="
SF='Sweep/KvCache.*rope*:Sweep/KvCache.*leftpad*:Sweep/KvCache.*idx*:KvCacheCAbi.*'
for tool in memcheck racecheck synccheck initcheck; do
  timeout 100 compute-sanitizer --tool $tool --print-limit 20 /tmp/gpu_tests --gtest_brief=1 --gtest_filter="$SF" > $O/san-kvextras-$tool.log 2>&1
  echo "$tool rc=$?"; tail -n 4 $O/san-kvextras-$tool.log
done
echo "== pytest =="
timeout 150 python3 -m pytest -q python/tests/test_kvcache_extras.py python/tests/test_varlen.py python/tests/test_varlen_variants.py python/tests/test_package.py > $O/pytest-kv.log 2>&1; echo "rc=$?"
tail -n 15 $O/pytest-kv.log
echo "== bench: rotary / leftpad / idx cost =="
timeout 150 python3 bench/gpu/bench_kvcache_rotary.py $O/h200-kvcache-rotary.csv 2>&1 | tee $O/bench-rotary.log | tail -n 40
echo "== bench: decode grid (head dim 128) =="
timeout 150 python3 bench/gpu/bench_decode.py $O/h200-decode.csv 2>&1 | tail -n 30
cd $OUT && tar czf logs.tgz logs
