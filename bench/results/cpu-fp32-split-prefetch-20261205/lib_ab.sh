#!/bin/bash
# new library (build-cpu) against OLD (a copy of the previous build), alternated, by the CLI
# usage: lib_ab.sh OLD_DIR ROUNDS "shape args" ...
old=$1 rounds=$2; shift 2
cli=build-cpu/tools/flashattn
for r in $(seq $rounds); do
  for shape in "$@"; do
    for v in new old; do
      if [ $v = new ]; then lp=""; else lp="LD_LIBRARY_PATH=$old"; fi
      out=$(env $lp $cli run --device cpu --threads 2 --dtype fp32 $shape --repeat 5 2>&1 | grep -E "^(forward|backward) " | awk '{print $1, $3, $(NF-1)}' | tr "\n" " ")
      echo "r$r [$shape] $v $out"
    done
  done
done
