"""Markdown summary of bench/cpu CSVs: flashattn against PyTorch CPU SDPA and naive OpenBLAS.

python3 summarize.py bench/results/cpu-<date>.csv [more runs of the same grid ...]
Each cell: flashattn / torch SDPA / naive GFLOP/s (with several files: the median over the
runs of each run's median); then flashattn's ratio to torch and its share of the FMA peak of
the same run(s); with several files, the largest spread of flashattn's run medians in the row,
(max - min) / median, since the shared host moves single runs.
"""
import csv
import statistics
import sys
from collections import defaultdict


def load(path):
    rows = list(csv.DictReader(l for l in open(path) if not l.startswith("#")))
    ceil = {r["pass"]: float(r["gflops"]) for r in rows if r["impl"] == "ceiling"}
    t = defaultdict(lambda: defaultdict(list))  # a file may hold several rounds (interleave.sh)
    for r in rows:
        if r["impl"] == "ceiling":
            continue
        key = (r["pass"], r["dtype"], int(r["hdim"]), int(r["causal"]), int(r["seqlen"]))
        t[key][r["impl"]].append(float(r["gflops"]))
    return ceil, t


def main(paths):
    runs = [load(p) for p in paths]
    med = lambda xs: statistics.median(xs) if xs else None
    peak = med([c["fma_peak"] for c, _ in runs if "fma_peak" in c])
    read = med([c["read_GBps"] for c, _ in runs if "read_GBps" in c]) or 0
    t = defaultdict(lambda: defaultdict(list))
    for _, tr in runs:
        for key, impls in tr.items():
            for impl, v in impls.items():
                t[key][impl].extend(v)
    many = any(len(v) > 1 for impls in t.values() for v in impls.values())
    if peak:
        print(f"FMA peak {peak:.0f} GFLOP/s, streaming read {read:.1f} GB/s"
              + (f" (medians of {len(runs)} runs)" if len(runs) > 1 else " (same run)") + "\n")
    seqlens = sorted({k[4] for k in t})
    print("| pass | dtype | hdim | causal | " + " | ".join(str(s) for s in seqlens) +
          " | vs torch | % of peak |" + (" run spread |" if many else ""))
    print("|---" * (6 + len(seqlens) + many) + "|")
    for key0 in sorted({k[:4] for k in t}, key=lambda k: (k[0] != "fwd", k[1], k[2], k[3])):
        cells, ratios, shares, spreads = [], [], [], []
        for s in seqlens:
            v = t.get(key0 + (s,), {})
            fa, th, nv = (med(v.get(i, [])) for i in ("flashattn", "torch_sdpa", "naive_openblas"))
            if fa is None:
                cells.append("–")
                continue
            cells.append(" / ".join(f"{x:.0f}" if x is not None else "–" for x in (fa, th, nv)))
            if th:
                ratios.append(fa / th)
            if peak:
                shares.append(100 * fa / peak)
            xs = v["flashattn"]
            if len(xs) > 1:
                spreads.append(100 * (max(xs) - min(xs)) / fa)
        rng = lambda xs, f: f"{f(min(xs))}–{f(max(xs))}" if xs else "–"
        print(f"| {key0[0]} | {key0[1]} | {key0[2]} | {'yes' if key0[3] else 'no'} | " + " | ".join(cells) +
              f" | {rng(ratios, lambda x: f'{x:.2f}×')} | {rng(shares, lambda x: f'{x:.0f}%')} |" +
              (f" {max(spreads):.0f}% |" if many and spreads else (" – |" if many else "")))


if __name__ == "__main__":
    main(sys.argv[1:])
