"""Medians of flashattn / FA2 (TFLOP/s ratio within each process) per setting, from the
bench_peers CSVs <prefix><n>-<label>.csv of one folder, and the second label's ratio over the
first's: python3 summarize.py <folder> f H G (forward: head order, groups);
python3 summarize.py <folder> b G A (backward: the fiftieth session's groups, the default)"""
import collections
import csv
import glob
import statistics as st
import sys

folder, prefix, labels = sys.argv[1], sys.argv[2], sys.argv[3:]
d = collections.defaultdict(list)
for f in sorted(glob.glob(f"{folder}/{prefix}[0-9]*-*.csv")):
    label = f.rsplit("-", 1)[1][:-4]
    if label not in labels:
        continue
    rows = list(csv.DictReader(l for l in open(f) if not l.startswith("#")))
    fa2 = {(x["hdim"], x["causal"], x["seqlen"]): float(x["tflops"]) for x in rows if x["impl"] == "sdpa_flash"}
    for x in rows:
        if x["impl"] == "flashattn":
            k = (x["hdim"], x["causal"], x["seqlen"])
            d[(label,) + k].append((float(x["tflops"]), float(x["tflops"]) / fa2[k]))
print("hdim causal seqlen | " + " | ".join(f"{o}: TFLOP/s, x FA2 (range)" for o in labels) +
      f" | {labels[1]} / {labels[0]}")
for k in sorted({k[1:] for k in d}, key=lambda t: (int(t[0]), t[1], int(t[2]))):
    cells, med = [], []
    for o in labels:
        v = d[(o,) + k]
        med.append(st.median(r for _, r in v))
        cells.append(f"{st.median(t for t, _ in v):.0f}, {med[-1]:.2f} "
                     f"({min(r for _, r in v):.2f}-{max(r for _, r in v):.2f}) n={len(v)}")
    print(" ".join(k) + " | " + " | ".join(cells) + f" | {med[1] / med[0]:.3f}")
