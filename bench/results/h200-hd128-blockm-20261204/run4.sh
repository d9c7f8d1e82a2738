#!/usr/bin/env bash
# Head dim 128: 128-row tiles where they pad >= 15% fewer rows than 192-row
# ones (193-256, 577-640 query rows). Default against FLASHATTN_SM90_HD128_BLOCKM=192
# (the rule before), alternated twice: chunked prefill (KV cache and
# flash_attn_func) and padded self-attention at 256 / 640; then the
# KV-cache / varlen / forward GPU tests.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/bm
xz -dc $D/B.so.xz > /tmp/B.so
xz -dc $D/flashattn_gpu_tests.xz > /tmp/gt; chmod +x /tmp/gt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/B.so
t0=$SECONDS
C="--impls flashattn --chunks 200,256,512,600,640,1024"
for r in 1 2; do
  for m in new old; do
    if [ $m = old ]; then export FLASHATTN_SM90_HD128_BLOCKM=192; else unset FLASHATTN_SM90_HD128_BLOCKM; fi
    timeout 60 python3 bench/gpu/bench_kvcache_prefill.py $L/kv-$m-r$r.csv --label kv_$m $C > $L/kv-$m-r$r.log 2>&1
    timeout 60 python3 bench/gpu/bench_kvcache_prefill.py $L/func-$m-r$r.csv --label func_$m --api func $C > $L/func-$m-r$r.log 2>&1
    timeout 60 python3 bench/gpu/bench_peers.py $L/self-$m-r$r.csv --hdims 128 --seqlens 256,640 --passes fwd --impls flashattn > $L/self-$m-r$r.log 2>&1
    echo "round $r $m t=$((SECONDS-t0))"
  done
done
unset FLASHATTN_SM90_HD128_BLOCKM
for f in $L/kv-*.csv $L/func-*.csv; do grep -v '^#' $f | grep -v '^impl' | cut -d, -f1-4,9; done
for f in $L/self-*.csv; do echo "$f"; grep -v '^#' $f | head -8; done
timeout 200 /tmp/gt --gtest_filter='*KvCache*:*Varlen*:*Forward*' --gtest_brief=1 > $L/gpu-tests.log 2>&1; echo "gpu tests rc=$? $(tail -3 $L/gpu-tests.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep -E '^\[  FAILED' $L/gpu-tests.log | head -20
cd $OUT && tar czf logs.tgz logs && rm -rf logs
