#!/usr/bin/env bash
# Split-KV moved to the per-sequence kernels (the padded kernel as before):
# the padded head-dim-64 / 128 kernels' SASS of A (dd32713) and B (this),
# forward / KV-cache / varlen GPU tests, the plain forward of A and B
# alternated three times, chunked prefill with the default dispatch beside
# SDPA, and chunks of 16 / 32 on the Hopper forward against the sm80 path.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/kvsm90
for x in A B; do xz -dc $D/$x.so.xz > /tmp/$x.so; done
xz -dc $D/flashattn_gpu_tests.xz > /tmp/gt; chmod +x /tmp/gt
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
for x in A B; do
  for k in 'Li128ELi192EEELb0ELi0E' 'Li64ELi192EEELb0ELi0E'; do
    cuobjdump -sass -fun "_ZN9flashattn6detail4cuda4sm9010fwd_kernelINS2_9FwdTraitsI13__nv_bfloat16${k}EEvNS2_10KernelArgsE" /tmp/$x.so > $L/sass-$k-$x.txt 2>&1
    echo "sass $x $k: $(grep -cE '^\s+/\*[0-9a-f]{4}\*/' $L/sass-$k-$x.txt) instructions, $(grep -c STL $L/sass-$k-$x.txt) STL"
  done
done
timeout 200 /tmp/gt --gtest_filter='*Forward*:*KvCache*:*Varlen*:*Edge*' --gtest_brief=1 > $L/gpu-tests-fwd.log 2>&1; echo "gpu tests fwd rc=$? $(tail -3 $L/gpu-tests-fwd.log | tr '\n' ' ') t=$((SECONDS-t0))"
grep -E '^\[  FAILED' $L/gpu-tests-fwd.log | head -20
for x in A B A B A B; do
  n=$(ls $L/fwd-$x-*.csv 2>/dev/null | wc -l)
  FLASHATTN_LIBRARY=/tmp/$x.so timeout 60 python3 bench/gpu/bench_peers.py $L/fwd-$x-$n.csv --hdims 64,128 --seqlens 1024,8192 --passes fwd --impls flashattn > $L/fwd-$x-$n.log 2>&1; echo "fwd $x rc=$? t=$((SECONDS-t0))"
done
FLASHATTN_LIBRARY=/tmp/B.so timeout 100 python3 bench/gpu/bench_kvcache_prefill.py $L/prefill-default.csv --label flashattn > $L/prefill-default.log 2>&1; echo "prefill default rc=$? t=$((SECONDS-t0))"
FLASHATTN_LIBRARY=/tmp/B.so FLASHATTN_SM90_KVCACHE_MIN_Q=1 timeout 60 python3 bench/gpu/bench_kvcache_prefill.py $L/prefill-sm90-small.csv --label flashattn_sm90 --impls flashattn --chunks 16,32,48 > $L/prefill-sm90-small.log 2>&1; echo "prefill sm90 small rc=$? t=$((SECONDS-t0))"
FLASHATTN_LIBRARY=/tmp/B.so FLASHATTN_DISABLE_SM90=1 timeout 60 python3 bench/gpu/bench_kvcache_prefill.py $L/prefill-sm80-small.csv --label flashattn_sm80 --impls flashattn --chunks 16,32,48 > $L/prefill-sm80-small.log 2>&1; echo "prefill sm80 small rc=$? t=$((SECONDS-t0))"
grep -hv '^#' $L/prefill-sm90-small.csv $L/prefill-sm80-small.csv | cut -d, -f1-10
cd $OUT && tar czf logs.tgz logs && rm -rf logs
