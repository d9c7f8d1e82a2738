#!/usr/bin/env bash
# The head-dim-128 tile rule with its wave count: chunked prefill at 200-640
# rows and padded self-attention at 256 / 640 on the default rule, then the
# KV-cache / varlen / forward GPU tests on it.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/bm2
xz -dc $D/B.so.xz > /tmp/B.so
xz -dc $D/flashattn_gpu_tests.xz > /tmp/gt; chmod +x /tmp/gt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/B.so
t0=$SECONDS
timeout 60 python3 bench/gpu/bench_kvcache_prefill.py $L/kv-rule.csv --label kv_rule --impls flashattn,sdpa_flash --chunks 200,256,600,640 > $L/kv-rule.log 2>&1
timeout 60 python3 bench/gpu/bench_peers.py $L/self-rule.csv --hdims 128 --seqlens 256,640 --passes fwd --impls flashattn,sdpa_flash > $L/self-rule.log 2>&1
grep -v '^#' $L/kv-rule.csv | cut -d, -f1-4,9; grep -v '^#' $L/self-rule.csv
timeout 200 /tmp/gt --gtest_filter='*KvCache*:*Varlen*:*Forward*' --gtest_brief=1 > $L/gpu-tests.log 2>&1; echo "gpu tests rc=$? $(tail -3 $L/gpu-tests.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep -E '^\[  FAILED' $L/gpu-tests.log | head -20
cd $OUT && tar czf logs.tgz logs && rm -rf logs
