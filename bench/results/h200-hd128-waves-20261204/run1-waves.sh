#!/usr/bin/env bash
# Wave quantisation check: Hopper forward, head dim 128, non-causal, bf16, 16k and 8k tokens,
# head counts whose 192-row tiles fill 9.8 / 10.4 / 14.3 / 15.0 waves of 132 SMs.
set -u
mkdir -p /tmp/w && xz -dc build-lead/wave/lib.so.xz > /tmp/w/libflashattn.so.0 && cp build-lead/wave/cli /tmp/w/flashattn && chmod +x /tmp/w/flashattn
export LD_LIBRARY_PATH=/tmp/w
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv
for r in 1 2 3; do
  for h in 15 16 22 23; do
    for s in 16384; do
      echo "== r$r heads $h seqlen $s"
      /tmp/w/flashattn run --device cuda --heads $h --seqlen-q $s --head-dim 128 --dtype bf16 --repeat 100 2>&1 | grep -E "forward"
    done
  done
  for h in 15 16 23; do
    echo "== r$r heads $h seqlen 8192 batch 2"
    /tmp/w/flashattn run --device cuda --batch 2 --heads $h --seqlen-q 8192 --head-dim 128 --dtype bf16 --repeat 100 2>&1 | grep -E "forward"
  done
done
