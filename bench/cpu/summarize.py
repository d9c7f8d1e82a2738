"""Markdown summary of a bench/cpu CSV: flashattn against PyTorch CPU SDPA and naive OpenBLAS.

python3 summarize.py bench/results/cpu-<date>.csv
Each cell: flashattn / torch SDPA / naive GFLOP/s; then flashattn's ratio to torch and its
share of the same run's FMA peak.
"""
import csv
import sys
from collections import defaultdict


def main(path):
    rows = list(csv.DictReader(l for l in open(path) if not l.startswith("#")))
    ceil = {r["pass"]: float(r["gflops"]) for r in rows if r["impl"] == "ceiling"}
    peak = ceil.get("fma_peak")
    t = defaultdict(dict)
    for r in rows:
        if r["impl"] == "ceiling":
            continue
        key = (r["pass"], r["dtype"], int(r["hdim"]), int(r["causal"]), int(r["seqlen"]))
        t[key][r["impl"]] = float(r["gflops"])
    print(f"FMA peak (same run) {peak:.0f} GFLOP/s, streaming read {ceil.get('read_GBps', 0):.1f} GB/s\n")
    seqlens = sorted({k[4] for k in t})
    print("| pass | dtype | hdim | causal | " + " | ".join(str(s) for s in seqlens) +
          " | vs torch | % of peak |")
    print("|---" * (6 + len(seqlens)) + "|")
    for key0 in sorted({k[:4] for k in t}, key=lambda k: (k[0] != "fwd", k[1], k[2], k[3])):
        cells, ratios, shares = [], [], []
        for s in seqlens:
            v = t.get(key0 + (s,), {})
            fa, th, nv = v.get("flashattn"), v.get("torch_sdpa"), v.get("naive_openblas")
            if fa is None:
                cells.append("–")
                continue
            cells.append(" / ".join(f"{x:.0f}" if x is not None else "–" for x in (fa, th, nv)))
            if th:
                ratios.append(fa / th)
            if peak:
                shares.append(100 * fa / peak)
        rng = lambda xs, f: f"{f(min(xs))}–{f(max(xs))}" if xs else "–"
        print(f"| {key0[0]} | {key0[1]} | {key0[2]} | {'yes' if key0[3] else 'no'} | " + " | ".join(cells) +
              f" | {rng(ratios, lambda x: f'{x:.2f}×')} | {rng(shares, lambda x: f'{x:.0f}%')} |")


if __name__ == "__main__":
    main(sys.argv[1])
