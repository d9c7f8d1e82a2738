#!/usr/bin/env bash
# Builds everything (installing what is missing) and runs the main job: the
# `flashattn` CLI on a realistic shape (batch 1, 16 heads, 4096 tokens, head
# dim 128, bf16), forward and backward, checked against the fp64 reference.
# It runs on the GPU when one is present, else on the CPU. Extra arguments go
# to `flashattn run` (e.g. --device cpu --causal --seqlen-q 8192).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
build=${FLASHATTN_BUILD_DIR:-$root/build}
"$build/tools/flashattn" run --backward --check "$@"
"$build/tools/flashattn" memory --seqlens 1024,4096,16384,65536
