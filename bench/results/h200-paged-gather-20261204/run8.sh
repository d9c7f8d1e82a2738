#!/usr/bin/env bash
# The final library (f6d0eb1): the Python KV-cache and varlen tests on CUDA
# (paged caches of 16-row pages now gathered), then the whole Python suite
# in what time is left.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
xz -dc build-lead/s29h/B.so.xz > /tmp/B.so
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/B.so
t0=$SECONDS
timeout 100 python3 -m pytest -q python/tests/test_kvcache_extras.py python/tests/test_varlen.py > $L/pytest-kv.log 2>&1; echo "pytest kv rc=$? $(tail -1 $L/pytest-kv.log) t=$((SECONDS-t0))"
cd $OUT && tar czf logs.tgz logs && rm -rf logs
