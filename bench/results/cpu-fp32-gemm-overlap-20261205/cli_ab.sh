#!/usr/bin/env bash
# usage: ab.sh ROUNDS "cfgs" "shapes"   cfg: old | ovN ; shape: "dtype extra-args"
F=/work/main/build-cpu/tools/flashattn
R=$1; shift
CFGS="$1"; shift
for r in $(seq $R); do
  while IFS= read -r shape; do
    [ -z "$shape" ] && continue
    for c in $CFGS; do
      if [ $c = old ]; then export LD_LIBRARY_PATH=/tmp/oldbuild/src; unset FLASHATTN_CPU_OVERLAP; else unset LD_LIBRARY_PATH; export FLASHATTN_CPU_OVERLAP=${c#ov}; fi
      ms=$($F run --device cpu --threads 2 $shape --repeat 10 2>&1 | grep -m1 "median" | awk '{print $3}')
      echo "$r|$shape|$c|$ms"
    done
  done <<< "$1"
done
