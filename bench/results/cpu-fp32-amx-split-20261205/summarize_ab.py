"""Medians of env_ab.sh / grid_ab.sh output: per shape and pass, FMA (amx=0) and tiles (amx=1)
GFLOP/s, their ratio, and each side's spread ((max - min) / median over the rounds)."""
import re
import statistics
import sys

shape, rows = None, {}
for line in open(sys.argv[1]):
    if line.startswith("=="):
        shape = line[3:].strip()
        continue
    m = re.match(r"r\d+ amx=(\d) (.*)", line)
    if not m or shape is None:
        continue
    f = m.group(2).split()
    for i in range(0, len(f) - 2, 3):
        rows.setdefault((shape, f[i]), {}).setdefault(m.group(1), []).append(float(f[i + 2]))
print("| shape | pass | FMA GFLOP/s | tiles GFLOP/s | tiles / FMA | spread FMA / tiles |")
print("|---|---|---|---|---|---|")
for (sh, ps), v in rows.items():
    a, b = v.get("0", []), v.get("1", [])
    if not a or not b:
        continue
    ma, mb = statistics.median(a), statistics.median(b)
    sp = lambda x, m: (max(x) - min(x)) / m * 100
    print(f"| {sh} | {ps} | {ma:.0f} | {mb:.0f} | {mb / ma:.2f} | {sp(a, ma):.0f}% / {sp(b, mb):.0f}% |")
