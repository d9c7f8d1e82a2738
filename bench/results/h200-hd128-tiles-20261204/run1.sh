#!/usr/bin/env bash
# Hopper forward, head dim 128, bf16: the 192 x 128 tile (three consumer warpgroups in serial
# order, the default) against two-warpgroup 128-row tiles with the intra-warpgroup overlap at
# 128 keys (FLASHATTN_SM90_HD128_BLOCKM=128), 160 and 176 keys (libraries built with
# -DFLASHATTN_SM90_DEFS=FLASHATTN_SM90_BLOCKN_HD128=160 / 176, FLASHATTN_HDIMS=128).
# bench_peers.py fwd, 2k-16k, causal and not; two rounds, configurations alternated.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
D=build-lead/s30b
xz -dc build-lead/s30a/A.so.xz > /tmp/A.so
for v in V160 V176; do xz -dc $D/$v.so.xz > /tmp/$v.so; done
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
t0=$SECONDS
B="timeout 110 python3 bench/gpu/bench_peers.py --hdims 128 --seqlens 2048,4096,8192,16384 --passes fwd"
for r in 1 2; do
  FLASHATTN_LIBRARY=/tmp/A.so $B $L/m192-r$r.csv --impls flashattn$([ $r = 1 ] && echo ,sdpa_cudnn) > $L/m192-r$r.log 2>&1; echo "m192 r$r rc=$? t=$((SECONDS-t0))"
  FLASHATTN_LIBRARY=/tmp/A.so FLASHATTN_SM90_HD128_BLOCKM=128 $B $L/m128n128-r$r.csv --impls flashattn > $L/m128n128-r$r.log 2>&1; echo "m128n128 r$r rc=$? t=$((SECONDS-t0))"
  for v in V176 V160; do
    FLASHATTN_LIBRARY=/tmp/$v.so FLASHATTN_SM90_HD128_BLOCKM=128 $B $L/m128n${v#V}-r$r.csv --impls flashattn > $L/m128n${v#V}-r$r.log 2>&1; echo "$v r$r rc=$? t=$((SECONDS-t0))"
  done
done
for f in $L/*.csv; do echo "== $(basename $f)"; grep -v '^#' $f | grep -v '^impl' | awk -F, '{printf "%s ", $0; print ""}' | cut -c1-120; done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
