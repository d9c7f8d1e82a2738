#!/usr/bin/env bash
# sm80 backward experiment: dQ order (A base, B after dV, C last) and v4 reductions (D, E = B + v4).
set -uo pipefail
L=$OUT/logs; mkdir -p $L
for x in A B C D E; do xz -dc build-lead/sm80v/$x.so.xz > /tmp/$x.so; done
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 FLASHATTN_DISABLE_SM90=1
t0=$SECONDS
for x in A B C D E; do FLASHATTN_LIBRARY=/tmp/$x.so timeout 120 python3 build-lead/sm80v/check.py > $L/check-$x.log 2>&1; echo "check $x rc=$? $(tail -1 $L/check-$x.log) t=$((SECONDS-t0))"; done
for r in 1 2; do
  order="A B C D E"; [ $r = 2 ] && order="E D C B A"
  for x in $order; do
    FLASHATTN_LIBRARY=/tmp/$x.so timeout 150 python3 bench/gpu/bench_peers.py $L/r$r-$x.csv --hdims 128 --passes bwd --seqlens 1024,4096,16384 --impls flashattn,sdpa_flash > $L/r$r-$x.log 2>&1; echo "peers r$r $x rc=$? t=$((SECONDS-t0))"
  done
done
cd $OUT && tar czf logs.tgz logs && rm -rf logs
