"""Plot GFLOP/s against seqlen, one line per implementation, from bench/results/cpu-*.csv.

python3 plot.py results.csv out.png
"""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main(path, out):
    rows = [r for r in csv.DictReader(l for l in open(path) if not l.startswith("#"))]
    ceil = {r["pass"]: float(r["gflops"]) for r in rows if r["impl"] == "ceiling"}
    data = [r for r in rows if r["impl"] != "ceiling"]
    panels = sorted({(r["pass"], int(r["hdim"]), int(r["causal"])) for r in data})
    cols = len({(p[1], p[2]) for p in panels})
    passes = sorted({p[0] for p in panels}, reverse=True)
    fig, axes = plt.subplots(len(passes), cols, figsize=(4 * cols, 3.4 * len(passes)), squeeze=False)
    keys = sorted({(p[1], p[2]) for p in panels})
    for pi, ps in enumerate(passes):
        for ki, (d, c) in enumerate(keys):
            ax = axes[pi][ki]
            lines = defaultdict(list)
            for r in data:
                if r["pass"] == ps and int(r["hdim"]) == d and int(r["causal"]) == c:
                    lines[f'{r["impl"]} {r["dtype"]}'].append((int(r["seqlen"]), float(r["gflops"])))
            for name, pts in sorted(lines.items()):
                pts.sort()
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
            if "fma_peak" in ceil:
                ax.axhline(ceil["fma_peak"], color="gray", ls="--", lw=1, label="FMA peak")
            ax.set_xscale("log", base=2)
            ax.set_title(f"{ps} hdim {d}{' causal' if c else ''}")
            ax.set_xlabel("seqlen")
            ax.set_ylabel("GFLOP/s")
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
