#!/bin/bash
# usage: dec_ab.sh rounds "libs" outdir [bench_decode args]  -- alternated cold bench_decode runs
rounds=$1; libs=$2; out=$3; shift 3; mkdir -p $out
cd /work/main
for r in $(seq $rounds); do for v in $libs; do
  OMP_NUM_THREADS=2 FLASHATTN_LIBRARY=/tmp/ab/$v.so PYTHONPATH=python:bench/cpu .venv/bin/python bench/cpu/bench_decode.py "$@" $out/r$r-$v.csv > /dev/null 2>&1
  echo "r$r $v read $(grep streaming $out/r$r-$v.csv | grep -o 'median [0-9.]*' | cut -d' ' -f2) | $(grep '^flashattn' $out/r$r-$v.csv | cut -d, -f2,3,8 | sed 's/bfloat16/bf16/;s/float32/fp32/' | tr '\n' ' ')"
done; done
