"""Medians of flashattn / FA2 (TFLOP/s ratio within each process) per grid order, from the
bench_peers CSVs p<n>-<order>.csv of one call folder: python3 summarize.py call2"""
import collections
import csv
import glob
import statistics as st
import sys

d = collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1] + "/p*-*.csv")):
    order = f.rsplit("-", 1)[1][:-4]
    rows = list(csv.DictReader(l for l in open(f) if not l.startswith("#")))
    fa2 = {(x["hdim"], x["causal"], x["seqlen"]): float(x["tflops"]) for x in rows if x["impl"] == "sdpa_flash"}
    for x in rows:
        if x["impl"] == "flashattn":
            k = (x["hdim"], x["causal"], x["seqlen"])
            d[(order,) + k].append((float(x["tflops"]), float(x["tflops"]) / fa2[k]))
orders = sorted({k[0] for k in d}, key=["tile", "head", "auto"].index)
print("hdim causal seqlen | " + " | ".join(f"{o}: TFLOP/s, x FA2" for o in orders) + " | auto / tile")
for k in sorted({k[1:] for k in d}, key=lambda t: (int(t[0]), t[1], int(t[2]))):
    cells = []
    for o in orders:
        v = d[(o,) + k]
        cells.append(f"{st.median(t for t, _ in v):.0f}, {st.median(r for _, r in v):.2f} "
                     f"({min(r for _, r in v):.2f}-{max(r for _, r in v):.2f})")
    last = st.median(r for _, r in d[("auto",) + k]) / st.median(r for _, r in d[("tile",) + k]) if "auto" in orders else float("nan")
    print(" ".join(k) + " | " + " | ".join(cells) + f" | {last:.3f}")
