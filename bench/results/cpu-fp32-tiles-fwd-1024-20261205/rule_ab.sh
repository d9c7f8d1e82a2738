#!/bin/bash
# default rule (new) against the FMA kernels (FLASHATTN_CPU_FP32_AMX=0, what these shapes ran before), alternated
cli=build-cpu/tools/flashattn
for r in 1 2 3 4; do
  for shape in "--heads 8 --seqlen-q 1024 --head-dim 128" "--heads 4 --seqlen-q 2048 --head-dim 128 --causal" "--heads 16 --seqlen-q 1024 --head-dim 64" "--heads 2 --seqlen-q 2048 --head-dim 256 --causal"; do
    for e in new 0; do
      if [ $e = new ]; then envs=""; else envs="FLASHATTN_CPU_FP32_AMX=0"; fi
      out=$(env $envs $cli run --device cpu --threads 2 --dtype fp32 $shape --repeat 5 --backward 2>&1 | grep -E "^(forward|backward) " | awk '{print $1, $3, $(NF-1)}' | tr "\n" " ")
      echo "r$r [$shape] $e $out"
    done
  done
done
