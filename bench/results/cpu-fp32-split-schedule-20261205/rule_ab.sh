#!/bin/bash
# The new thresholds (forward from 256 visible keys a row, backward from 1024) at their
# default against the FMA kernels these shapes ran before (FLASHATTN_CPU_FP32_AMX=0), alternated.
cli=${FLASHATTN_CLI:-build-cpu/tools/flashattn}
for r in 1 2 3; do
  for shape in "--heads 16 --seqlen-q 512 --head-dim 128" "--heads 16 --seqlen-q 512 --head-dim 128 --causal" \
               "--heads 32 --seqlen-q 512 --head-dim 64 --causal" "--heads 8 --seqlen-q 1024 --head-dim 128" \
               "--heads 16 --seqlen-q 1024 --head-dim 64" "--heads 4 --seqlen-q 2048 --head-dim 128 --causal"; do
    for e in new 0; do
      if [ $e = new ]; then envs=""; else envs="FLASHATTN_CPU_FP32_AMX=0"; fi
      out=$(env $envs $cli run --device cpu --threads 2 --dtype fp32 $shape --repeat 5 --backward 2>&1 | grep -E "^(forward|backward) " | awk '{print $1, $3, $(NF-1)}' | tr "\n" " ")
      echo "r$r [$shape] $e $out"
    done
  done
done
