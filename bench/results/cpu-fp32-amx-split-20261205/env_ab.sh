#!/bin/bash
# usage: env_ab.sh ROUNDS -- cli args...   the same build, fp32 on the FMA kernels
# (FLASHATTN_CPU_FP32_AMX=0) and on AMX tiles (=1), alternated; prints pass, ms and GFLOP/s per run.
rounds=$1; shift
cli=${FLASHATTN_CLI:-build-cpu/tools/flashattn}
for r in $(seq "$rounds"); do
  for e in 0 1; do
    out=$(FLASHATTN_CPU_FP32_AMX=$e "$cli" run --device cpu --threads 2 --dtype fp32 "$@" 2>&1 |
          grep -E "^(forward|backward) " | awk "{print \$1, \$3, \$(NF-1)}" | tr "\n" " ")
    echo "r$r amx=$e $out"
  done
done
