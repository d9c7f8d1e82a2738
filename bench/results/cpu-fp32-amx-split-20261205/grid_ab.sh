#!/bin/bash
# The env_ab.sh A/B over a grid: head dims 64 / 128 / 256, 512-8192 tokens, causal and not,
# batch 1, heads = 16384 / seqlen / (hdim / 64) rounded up to at least 1 (the CPU grid's
# 16k tokens scaled down by 4), forward and backward, ROUNDS alternated rounds per shape.
rounds=${1:-3}
here=$(dirname "$0")
for d in 64 128 256; do
  for s in 512 1024 2048 4096 8192; do
    h=$(( 16384 / s * 64 / d )); [ $h -lt 1 ] && h=1
    for c in "" "--causal"; do
      echo "== d$d s$s h$h ${c:-full}"
      "$here/env_ab.sh" "$rounds" --heads $h --seqlen-q $s --head-dim $d $c --repeat 3 --backward
    done
  done
done
