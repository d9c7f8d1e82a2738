#!/usr/bin/env bash
# ALiBi and dropout through the Python varlen functions, ALiBi through flash_attn_with_kvcache on CUDA tensors (H200:
# the varlen forward/backward on the Hopper score-mod kernels, the KV cache on the sm80 kernels),
# with the neighbouring varlen / variants suites.
set -uo pipefail
xz -dc build-lead/c1/libflashattn.so.xz > /tmp/libB.so
L=$OUT/logs; mkdir -p $L
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/libB.so
t0=$SECONDS
timeout 400 python3 -m pytest python/tests/test_varlen_variants.py python/tests/test_varlen.py python/tests/test_variants.py -v -rs > $L/pytest-varlen-variants.log 2>&1; echo "pytest rc=$? t=$((SECONDS-t0))"
grep -E "cuda|passed|failed" $L/pytest-varlen-variants.log | tail -25
cd $OUT && tar czf logs.tgz logs && rm -rf logs
