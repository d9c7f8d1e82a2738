#!/usr/bin/env bash
# Deterministic sm90 backward at short lengths: how many kv heads to interleave (knob
# FLASHATTN_SM90_DET_INTERLEAVE_LOG2; "-" = the heuristic, 4 heads while their Q/dO fit 8 MB else 2).
set -uo pipefail
xz -dc build-lead/c1/libflashattn.so.xz > /tmp/libB.so
L=$OUT/logs; mkdir -p $L
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_LIBRARY=/tmp/libB.so
t0=$SECONDS
AB_TIMEOUT=100 bash bench/gpu/env_ab.sh $L/interleave ${ROUNDS:-3} - FLASHATTN_SM90_DET_INTERLEAVE_LOG2=3 FLASHATTN_SM90_DET_INTERLEAVE_LOG2=4 -- --passes bwd --seqlens 512,1024,2048,4096 --impls flashattn,flashattn_det > $L/interleave.log 2>&1
echo "interleave rc=$? t=$((SECONDS-t0))"
cd $OUT && tar czf logs.tgz logs && rm -rf logs
