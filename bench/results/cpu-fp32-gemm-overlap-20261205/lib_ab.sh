#!/bin/bash
# CLI runs alternated between a base library (directory $1 holding its
# libflashattn.so.0, which LD_LIBRARY_PATH puts before build-cpu's RUNPATH)
# and build-cpu's; $2 rounds. fp32 forward + backward on the shapes below,
# bf16 on two. Prints: round lib dtype [shape] pass ms GFLOP/s.
base=$1; rounds=${2:-3}
cli=${FLASHATTN_CLI:-build-cpu/tools/flashattn}
for r in $(seq "$rounds"); do
  for shape in "fp32 --head-dim 128 --heads 4 --seqlen-q 2048" "fp32 --head-dim 128 --heads 4 --seqlen-q 2048 --causal" \
               "fp32 --head-dim 128 --heads 4 --seqlen-q 4096" "fp32 --head-dim 128 --heads 4 --seqlen-q 4096 --causal" \
               "fp32 --head-dim 128 --heads 8 --seqlen-q 1024" "fp32 --head-dim 128 --heads 16 --seqlen-q 512 --causal" \
               "fp32 --head-dim 64 --heads 8 --seqlen-q 2048" "fp32 --head-dim 256 --heads 2 --seqlen-q 2048" \
               "bf16 --head-dim 128 --heads 4 --seqlen-q 2048" "bf16 --head-dim 128 --heads 4 --seqlen-q 4096 --causal"; do
    dt=${shape%% *}; sh=${shape#* }
    for v in base new; do
      if [ $v = base ]; then export LD_LIBRARY_PATH=$base; else unset LD_LIBRARY_PATH; fi
      $cli run --device cpu --threads 2 --dtype $dt $sh --repeat 5 --backward 2>&1 |
        grep -E "^(forward|backward) " | awk -v r=$r -v v=$v -v s="$dt $sh" '{print r, v, "[" s "]", $1, $3, $(NF-1)}'
    done
  done
done
