"""Paired ratios of an ab_cli.sh CSV: for each shape, pass and build, the ratio to the
first build within each round, then the median and range over the rounds (a shared host
moves every build of a round together, so these are steadier than ratios of medians).
  python3 bench/cpu/ab_paired.py OUT.csv
"""
import csv
import statistics
import sys

rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if not l.startswith("#"))]
builds = list(dict.fromkeys(r["build"] for r in rows))
shapes = sorted({(r["dtype"], r["seqlen"], r["causal"]) for r in rows})
cell = {(r["build"], r["round"], r["dtype"], r["seqlen"], r["causal"]): r for r in rows}
for s in shapes:
    for p in ("fwd_gflops", "bwd_gflops"):
        for b in builds[1:]:
            rat = []
            for rnd in sorted({r["round"] for r in rows}, key=int):
                a, x = cell.get((builds[0], rnd, *s)), cell.get((b, rnd, *s))
                if a and x and a[p] and x[p]:
                    rat.append(float(x[p]) / float(a[p]))
            if rat:
                print(f"{s[0]} {s[1]} causal={s[2]} {p[:3]} {b} / {builds[0]}: median {statistics.median(rat):.3f}"
                      f" ({min(rat):.2f}-{max(rat):.2f}, {len(rat)} rounds)")
