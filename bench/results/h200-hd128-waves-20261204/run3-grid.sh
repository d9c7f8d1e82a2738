#!/usr/bin/env bash
# 192- vs 128-row head-dim-128 tiles on DESIGN.md's grid (forward, bf16), cuDNN in every process,
# alternated, three rounds: bench_peers.py with FLASHATTN_SM90_HD128_BLOCKM forced.
set -u
mkdir -p /tmp/w && xz -dc build-lead/wave/lib.so.xz > /tmp/w/libflashattn.so.0
export PYTHONPATH=$PWD/python FLASHATTN_LIBRARY=/tmp/w/libflashattn.so.0 PYTHONUNBUFFERED=1
mkdir -p $OUT/bm
for r in 1 2 3; do
  for bm in 192 128; do
    FLASHATTN_SM90_HD128_BLOCKM=$bm python3 bench/gpu/bench_peers.py $OUT/bm/bm$bm-r$r.csv --hdims 128 --passes fwd --impls flashattn,sdpa_cudnn > $OUT/bm/bm$bm-r$r.log 2>&1
    echo "r$r bm$bm rc=$?"
  done
done
python3 - <<'PY'
import csv, glob, os, statistics, collections
out = os.environ["OUT"]
d = collections.defaultdict(list)
for f in sorted(glob.glob(out + "/bm/*.csv")):
    bm = os.path.basename(f).split("-")[0]
    rows = [r for r in csv.DictReader(l for l in open(f) if not l.startswith("#"))]
    cud = {(r["hdim"], r["seqlen"], r["causal"]): float(r["tflops"]) for r in rows if r["impl"] == "sdpa_cudnn"}
    for r in rows:
        if r["impl"] == "flashattn":
            k = (r["hdim"], r["seqlen"], r["causal"])
            d[(bm,) + k].append((float(r["tflops"]), float(r["tflops"]) / cud[k]))
for k in sorted(d, key=lambda k: (k[3], int(k[2]), k[0])):
    v = d[k]
    print(k, "tflops", [round(x[0]) for x in v], "med", round(statistics.median(x[0] for x in v)),
          "vs cudnn", round(statistics.median(x[1] for x in v), 3))
PY
