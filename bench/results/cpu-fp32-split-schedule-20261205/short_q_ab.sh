#!/bin/bash
# Short query runs against long keys (KV-cache chunks, speculative decoding past the
# decode path's seqlen_q * group <= 256): fp32 forward on the tiles (=1) against the FMA
# kernels (=0), same build, alternated; 4096 keys, head dim 128, GQA 8 (32 / 4 heads)
# and MHA (8 / 8 heads). Prints: round, amx, shape, forward ms.
cli=${FLASHATTN_CLI:-build-cpu/tools/flashattn}
for r in 1 2 3; do
  for shape in "--heads 32 --heads-kv 4 --seqlen-q 64" "--heads 32 --heads-kv 4 --seqlen-q 128" \
               "--heads 32 --heads-kv 4 --seqlen-q 256" "--heads 8 --seqlen-q 64" "--heads 8 --seqlen-q 256" \
               "--heads 8 --seqlen-q 512" "--heads 8 --seqlen-q 1024"; do
    for e in 0 1; do
      ms=$(FLASHATTN_CPU_FP32_AMX=$e $cli run --device cpu --threads 2 --dtype fp32 --head-dim 128 --seqlen-k 4096 \
           $shape --repeat 10 2>&1 | grep "forward  median" | awk '{print $3}')
      echo "r$r amx=$e [$shape --seqlen-k 4096] $ms"
    done
  done
done
