#!/usr/bin/env bash
# README's sm80 table: e453e24's kernels (PLAIN forward, softcap in the backward's VAR kernel) against FA2
# on the whole grid, forward and backward, two processes.
set -uo pipefail
xz -dc build-lead/ab/libA.so.xz > /tmp/libA.so
L=$OUT/logs; mkdir -p $L
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_DISABLE_SM90=1 FLASHATTN_LIBRARY=/tmp/libA.so
t0=$SECONDS
for r in 1 2; do
  timeout 250 python3 bench/gpu/bench_peers.py $L/sm80-plain-r$r.csv --impls flashattn,sdpa_flash > /dev/null 2>&1; echo "peers r$r rc=$? t=$((SECONDS-t0))"
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
