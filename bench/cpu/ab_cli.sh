#!/usr/bin/env bash
# A/B of libflashattn builds through the CLI (forward and backward), one process per
# (build, shape, round), builds alternated so that each sees the same host load:
#   bench/cpu/ab_cli.sh OUT.csv CLI DIR_A DIR_B [DIR_C ...] [--rounds 5] [--shapes "fp32:4096:0 fp32:4096:1"] [run args]
# each DIR holds a libflashattn.so.0 (the CLI is linked against the soname, so
# LD_LIBRARY_PATH picks the build); a shape is dtype:seqlen:causal, run with --heads 4 and
# --backward unless the run args say otherwise. OUT.csv: build,round,dtype,seqlen,causal,
# fwd_gflops,bwd_gflops; then the medians per (shape, build), their spread and each
# build's ratio to the first.
set -euo pipefail
out=$1 cli=$2
shift 2
dirs=()
while [ $# -gt 0 ] && [[ $1 != --* ]]; do dirs+=("$1"); shift; done
rounds=5
shapes="fp32:4096:0 fp32:4096:1"
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --shapes) shapes=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
echo "# ab_cli.sh $cli ${dirs[*]} --rounds $rounds --shapes '$shapes' ${args[*]}; $(nproc) cores; $(date -u +%FT%TZ)" > "$out"
echo "build,round,dtype,seqlen,causal,fwd_gflops,bwd_gflops" >> "$out"
for r in $(seq "$rounds"); do
  for s in $shapes; do
    IFS=: read -r dt n c <<< "$s"
    for d in "${dirs[@]}"; do
      causal=(); [ "$c" = 1 ] && causal=(--causal)
      res=$(LD_LIBRARY_PATH=$d "$cli" run --device cpu --dtype "$dt" --heads 4 --seqlen-q "$n" "${causal[@]}" \
            --backward --repeat 3 "${args[@]}" 2>&1)
      f=$(awk '/^forward/ {print $(NF-1)}' <<< "$res"); g=$(awk '/^backward/ {print $(NF-1)}' <<< "$res")
      echo "$d,$r,$dt,$n,$c,$f,$g" >> "$out"
    done
  done
  echo "round $r of $rounds done" >&2
done
python3 - "$out" <<'PY'
import csv, statistics, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if not l.startswith("#"))]
keys = sorted({(r["dtype"], r["seqlen"], r["causal"]) for r in rows})
builds = list(dict.fromkeys(r["build"] for r in rows))
for k in keys:
    for p in ("fwd_gflops", "bwd_gflops"):
        cells = []
        for bld in builds:
            v = [float(r[p]) for r in rows if (r["dtype"], r["seqlen"], r["causal"]) == k and r["build"] == bld and r[p]]
            cells.append((statistics.median(v), min(v), max(v)) if v else None)
        if None in cells:
            continue
        txt = " | ".join(f"{bld}: {m:.1f} ({lo:.1f}-{hi:.1f}) x{m / cells[0][0]:.3f}"
                         for bld, (m, lo, hi) in zip(builds, cells))
        print(f"{k[0]} {k[1]} causal={k[2]} {p[:3]}: {txt}")
PY
