#!/usr/bin/env bash
# Fiftieth session, on an H200 only (elsewhere it stops after nvidia-smi), the library of this
# session (build-full with the sm80 backward's grid in groups of units; its fp8 and bf16 forward
# kernels are HEAD's before it), carried as build-lead/s50/lib.xz:
#   (1) three bench_fp8.py processes: issue 9's fp8 / bf16 ratio with the forty-sixth session's
#       change (padded head-dim-128 fp8 calls on the per-sequence kernel, measured on H100s only);
#   (2) the sm80 backward's grid order on the H200 (the README's sm80 table is the H200's):
#       bench_peers.py backward, flashattn and SDPA's FA2, FLASHATTN_DISABLE_SM90=1,
#       FLASHATTN_SM80_BWD_ORDER=tile against the default (auto), processes T A A T.
# Run from the repository root with $OUT set; logs.tgz comes back.
set -uo pipefail
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $L/gpu.txt; cat $L/gpu.txt
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
xz -dc build-lead/s50/lib.xz > /tmp/lib.so; export FLASHATTN_LIBRARY=/tmp/lib.so
t0=$SECONDS
case "$name" in
*H200*)
  for r in 0 1 2; do
    timeout 90 python3 bench/gpu/bench_fp8.py $L/fp8-r$r.csv > $L/fp8-r$r.log 2>&1; echo "fp8 run $r rc=$? t=$((SECONDS-t0))"
  done
  grep -h ',16384,' $L/fp8-r*.csv | grep -v sdpa
  n=0
  for o in tile auto auto tile; do
    n=$((n+1))
    if [ $o = auto ]; then unset FLASHATTN_SM80_BWD_ORDER; else export FLASHATTN_SM80_BWD_ORDER=$o; fi
    FLASHATTN_DISABLE_SM90=1 timeout 100 python3 bench/gpu/bench_peers.py $L/sm80bwd-p$n-$o.csv --passes bwd --hdims 64,128,256 --seqlens 1024,2048,4096,16384 --impls flashattn,sdpa_flash > $L/sm80bwd-p$n-$o.log 2>&1
    echo "sm80 bwd $n $o rc=$? t=$((SECONDS-t0))"
  done
  ;;
*) echo "not an H200: nothing run" ;;
esac
cd $OUT && tar czf logs.tgz logs && rm -rf logs
