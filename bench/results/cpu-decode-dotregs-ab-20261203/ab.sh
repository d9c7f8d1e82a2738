#!/bin/bash
# usage: ab.sh ROUNDS "libdirs" cli-args...
R=$1; LIBS=$2; shift 2
for r in $(seq $R); do for L in $LIBS; do
  v=$(LD_LIBRARY_PATH=/tmp/$L /work/main/build-h200/tools/flashattn run --device cpu "$@" 2>&1 | grep -i median | head -1 | sed -E 's/.*median +([0-9.]+) ms +\(min ([0-9.]+).*/\1 \2/')
  echo "$L $v"
done; done | python3 -c '
import sys, statistics as st, collections
d=collections.defaultdict(list)
for line in sys.stdin:
  p=line.split()
  if len(p)==3: d[p[0]].append((float(p[1]),float(p[2])))
for k,v in d.items():
  meds=sorted(x[0] for x in v); mins=sorted(x[1] for x in v)
  print(f"{k}: median-of-medians {st.median(meds):.3f} ms (range {meds[0]:.3f}-{meds[-1]:.3f}), best min {mins[0]:.3f}, median min {st.median(mins):.3f}")
'
