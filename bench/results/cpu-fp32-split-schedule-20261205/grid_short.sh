#!/bin/bash
here=$(dirname "$0")/../cpu-fp32-amx-split-20261205  # env_ab.sh
for d in 64 128 256; do
  for s in 512 1024 2048; do
    h=$(( 16384 / s * 64 / d )); [ $h -lt 1 ] && h=1
    for c in "" "--causal"; do
      echo "== d$d s$s h$h ${c:-full}"
      "$here/env_ab.sh" 3 --heads $h --seqlen-q $s --head-dim $d $c --repeat 3 --backward
    done
  done
done
