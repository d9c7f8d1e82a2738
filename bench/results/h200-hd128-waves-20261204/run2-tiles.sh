#!/usr/bin/env bash
# 128- vs 192-row head-dim-128 tiles on common LLM shapes (bf16, Hopper forward), CLI medians.
set -u
mkdir -p /tmp/w && xz -dc build-lead/wave/lib.so.xz > /tmp/w/libflashattn.so.0 && cp build-lead/wave/cli /tmp/w/flashattn && chmod +x /tmp/w/flashattn
export LD_LIBRARY_PATH=/tmp/w
run() {  # label env... -- args
  local bm=$1; shift
  local out
  out=$(env FLASHATTN_SM90_HD128_BLOCKM=$bm /tmp/w/flashattn run --device cuda --head-dim 128 --dtype bf16 --repeat 60 "$@" 2>&1 | grep -E "^forward")
  echo "bm=$bm $* :: $out"
}
for r in 1 2; do
  for shape in "32 1024 1" "32 2048 1" "32 4096 1" "32 8192 1" "40 4096 1" "64 2048 1" "64 4096 1" "24 4096 1" "48 4096 1" "16 16384 1" "16 4096 4" "8 8192 1"; do
    set -- $shape
    for bm in 192 128; do
      run $bm --heads $1 --seqlen-q $2 --batch $3
    done
  done
  for shape in "32 4096 1" "32 8192 1" "16 16384 1"; do
    set -- $shape
    for bm in 192 128; do run $bm --heads $1 --seqlen-q $2 --batch $3 --causal; done
  done
done
