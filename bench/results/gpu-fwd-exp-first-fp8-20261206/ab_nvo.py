"""Per cell (impl, hdim, seqlen, causal): TFLOP/s of library N and O over the
rounds and the ratio of their medians. Files: <name>-<round>-<n|o>.csv.

  python3 ab_nvo.py 'run1/fp8-*.csv'
"""
import collections
import csv
import glob
import statistics
import sys

cells = collections.defaultdict(lambda: collections.defaultdict(list))
for path in sorted(glob.glob(sys.argv[1])):
    lib = path.rsplit("-", 1)[1][0]
    with open(path) as f:
        for r in csv.DictReader(line for line in f if not line.startswith("#")):
            key = (r["impl"], r.get("pass", "fwd"), int(r["hdim"]), int(r["causal"]), int(r["seqlen"]))
            cells[key][lib].append(float(r["tflops"]))
print("| impl | pass | hdim | causal | seqlen | N | O | N / O (medians) |")
print("|---|---|---|---|---|---|---|---|")
for key in sorted(cells):
    n, o = cells[key]["n"], cells[key]["o"]
    if not n or not o:
        continue
    fmt = lambda xs: " ".join(f"{x:.0f}" for x in xs)
    print(f"| {' | '.join(map(str, key))} | {fmt(n)} | {fmt(o)} | {statistics.median(n) / statistics.median(o):.3f} |")
