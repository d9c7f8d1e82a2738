#!/bin/bash
# usage: cli_ab.sh rounds "variants" -- cli args...   prints median ms per variant per round
rounds=$1; vars=$2; shift 2
for r in $(seq $rounds); do
  for v in $vars; do
    mkdir -p /tmp/ab/L/$v; ln -sf /tmp/ab/$v.so /tmp/ab/L/$v/libflashattn.so.0
    out=$(LD_LIBRARY_PATH=/tmp/ab/L/$v /work/main/build-cpu/tools/flashattn run --device cpu --threads 2 "$@" 2>&1 | grep -E "^(forward|backward) " | awk '{print $1, $3, $NF=="GFLOP/s"?$(NF-1):""}' | tr '\n' ' ')
    echo "r$r $v $out"
  done
done
