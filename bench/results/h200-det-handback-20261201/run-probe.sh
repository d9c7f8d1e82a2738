#!/usr/bin/env bash
# Diagnostic (not a kept change): where the deterministic sm90 backward loses time.
# probe 0 = as shipped; 1 = release after the add's read, not its completion; 2 = no turn wait; 3 = both.
set -uo pipefail
xz -dc build-lead/c1/libprobe.so.xz > /tmp/libP.so
L=$OUT/logs; mkdir -p $L
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/libP.so
t0=$SECONDS
AB_TIMEOUT=100 bash bench/gpu/env_ab.sh $L/probe 2 FLASHATTN_SM90_DET_PROBE=0 FLASHATTN_SM90_DET_PROBE=1 FLASHATTN_SM90_DET_PROBE=2 FLASHATTN_SM90_DET_PROBE=3 -- --passes bwd --hdims 128 --seqlens 2048,4096,8192,16384 --impls flashattn,flashattn_det > $L/probe.log 2>&1
echo "probe rc=$? t=$((SECONDS-t0))"
cd $OUT && tar czf logs.tgz logs && rm -rf logs
