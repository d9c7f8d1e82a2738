#!/usr/bin/env bash
# A/B of the deterministic sm90 backward's two dQ writers, whole backward grid, flashattn and
# flashattn_det in each process: s0 = the library at 8181269 (before; -DFLASHATTN_CUDA_ARCHS=90a
# -DFLASHATTN_HDIMS=64;128;256), s1 = this build with one writer (FLASHATTN_SM90_DET_TWO_WRITERS=0),
# s2 = this build with two (the default). One round per env_ab.sh call, while time is left.
# Inputs (device tool, carry build-lead/c1): libflashattn.so.xz = build-h200's library of this
# change, libhead.so.xz = 8181269's. Run here: BUDGET_S=280 (rounds 1-2), then
# ROUNDS="3 4 5 6" REVERSE_EVEN=1 BUDGET_S=200; summary: python3 ab_compare.py DIR.
set -uo pipefail
xz -dc build-lead/c1/libflashattn.so.xz > /tmp/libB.so
xz -dc build-lead/c1/libhead.so.xz > /tmp/libA.so
L=$OUT/logs; mkdir -p $L
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
for r in ${ROUNDS:-1 2}; do
  [ $((SECONDS - t0)) -gt ${BUDGET_S:-300} ] && { echo "round $r skipped (t=$((SECONDS-t0)))"; continue; }
  set0=FLASHATTN_LIBRARY=/tmp/libA.so
  set1=FLASHATTN_LIBRARY=/tmp/libB.so,FLASHATTN_SM90_DET_TWO_WRITERS=0
  set2=FLASHATTN_LIBRARY=/tmp/libB.so,FLASHATTN_SM90_DET_TWO_WRITERS=1
  if [ $((r % 2)) -eq 0 ] && [ "${REVERSE_EVEN:-0}" = 1 ]; then
    # even rounds run the settings in reverse order (s2, s1, s0), so that an order effect shows
    AB_TIMEOUT=120 bash bench/gpu/env_ab.sh $L/ab-round$r 1 $set2 $set1 $set0 -- --passes bwd --impls flashattn,flashattn_det >> $L/ab.log 2>&1
    echo "round $r (reversed) rc=$? t=$((SECONDS-t0))"
    d=$L/ab-round$r; mv $d/ab-r1-s0.csv $d/tmp.csv; mv $d/ab-r1-s2.csv $d/ab-r1-s0.csv; mv $d/tmp.csv $d/ab-r1-s2.csv
  else
    AB_TIMEOUT=120 bash bench/gpu/env_ab.sh $L/ab-round$r 1 $set0 $set1 $set2 -- --passes bwd --impls flashattn,flashattn_det >> $L/ab.log 2>&1
    echo "round $r rc=$? t=$((SECONDS-t0))"
  fi
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
