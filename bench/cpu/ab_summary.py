"""Summary of an alternated A/B CSV (ab_bench.sh: builds base / new; isa_ab.sh:
one label per SIMD path): rows are label, round, then bench_cpu's columns.
Per shape, each label's GFLOP/s in every round, its median and best, and both
against the first label's.

  python3 bench/cpu/ab_summary.py OUT.csv
"""
import collections
import csv
import statistics
import sys


def main(path):
    t = collections.defaultdict(list)
    labels = []
    for row in csv.reader(l for l in open(path) if not l.startswith("#")):
        if len(row) < 3 or row[1] == "round":  # a header line
            continue
        label, x = row[0], row[2:]  # x: bench_cpu's columns
        if label not in labels:
            labels.append(label)
        t[(x[1], x[2], x[3], x[4], x[5]), label].append(float(x[-1]))
    ref = labels[0]
    print(f"pass,dtype,hdim,seqlen,causal | per label: rounds, median, best (x {ref}'s)")
    for shape in sorted({k for k, _ in t}):
        a = t[shape, ref]
        cells = []
        for label in labels:
            v = t[shape, label]
            med, best = statistics.median(v), max(v)
            vs = "" if label == ref else f" ({med / statistics.median(a):.2f}x, {best / max(a):.2f}x)"
            cells.append(f"{label}: {' '.join(f'{x:.0f}' for x in v)}; {med:.1f}, {best:.1f}{vs}")
        print(",".join(shape), "|", " | ".join(cells))


if __name__ == "__main__":
    main(sys.argv[1])
