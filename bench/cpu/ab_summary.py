"""Summary of an ab_bench.sh CSV: per shape, each build's GFLOP/s in every
round, the medians and the bests, and new / base for both.

  python3 bench/cpu/ab_summary.py OUT.csv
"""
import collections
import csv
import statistics
import sys


def main(path):
    t = collections.defaultdict(list)
    for row in csv.reader(l for l in open(path) if not l.startswith("#")):
        build, x = row[0], row[2:]  # x: bench_cpu's columns
        t[(x[1], x[2], x[3], x[4], x[5], build)].append(float(x[-1]))
    print("pass,dtype,hdim,seqlen,causal: base rounds | new rounds | median base -> new | best base -> new")
    for k in sorted({k[:-1] for k in t}):
        a, n = t[k + ("base",)], t[k + ("new",)]
        ma, mn = statistics.median(a), statistics.median(n)
        print(",".join(k), "|", " ".join(f"{v:.0f}" for v in a), "|", " ".join(f"{v:.0f}" for v in n),
              f"| {ma:.1f} -> {mn:.1f} ({mn / ma:.2f}x) | {max(a):.1f} -> {max(n):.1f} ({max(n) / max(a):.2f}x)")


if __name__ == "__main__":
    main(sys.argv[1])
