#!/bin/bash
# alternated bench_decode.py runs: $1 = rounds, rest = library names in /tmp/ab
cd /work/main
n=$1; shift
for r in $(seq 1 $n); do
  for lib in "$@"; do
    OMP_NUM_THREADS=2 FLASHATTN_LIBRARY=/tmp/ab/$lib.so PYTHONPATH=python /tmp/ci-clone33/.venv/bin/python bench/cpu/bench_decode.py /tmp/dec/s2-$lib-r$r.csv > /tmp/dec/s2-$lib-r$r.log 2>&1
    f=/tmp/dec/s2-$lib-r$r.csv
    echo "$lib r$r read $(grep -o 'median [0-9.]*' $f | cut -d' ' -f2) $(grep '^flashattn' $f | awk -F, '{printf "%s%s:%s(%s) ", substr($2,1,4),$3,$8,$9}')"
  done
done
