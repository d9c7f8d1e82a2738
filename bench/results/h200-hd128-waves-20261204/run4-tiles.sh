#!/usr/bin/env bash
# 192- vs 128-row head-dim-128 tiles (bf16 forward, CLI medians of 60 calls): the grid's shapes
# (16 heads, 16k tokens per batch) non-causal and causal, and more lengths at 32 heads.
set -u
mkdir -p /tmp/w && xz -dc build-lead/wave/lib.so.xz > /tmp/w/libflashattn.so.0 && cp build-lead/wave/cli /tmp/w/flashattn && chmod +x /tmp/w/flashattn
export LD_LIBRARY_PATH=/tmp/w
run() {
  local bm=$1; shift
  local out
  out=$(env FLASHATTN_SM90_HD128_BLOCKM=$bm /tmp/w/flashattn run --device cuda --head-dim 128 --dtype bf16 --repeat 60 "$@" 2>&1 | grep -E "^forward" | sed 's/  (min.*runs)//')
  echo "bm=$bm $* :: $out"
}
for r in 1 2; do
  for c in "" "--causal"; do
    for shape in "512 32" "1024 16" "2048 8" "4096 4" "8192 2" "16384 1"; do
      set -- $shape
      for bm in 192 128; do run $bm --heads 16 --seqlen-q $1 --batch $2 $c; done
    done
  done
  for s in 3072 6144 12288; do
    for bm in 192 128; do run $bm --heads 32 --seqlen-q $s --batch 1; done
  done
done
