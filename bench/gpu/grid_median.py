"""README table of several bench_peers.py runs of the same build: per cell the
median TFLOP/s of each implementation over the runs, and per row the range of
flashattn's ratio to each peer, each ratio taken within one run (one process:
same clocks) and then the median over runs.

  python3 bench/gpu/grid_median.py RUN.csv [RUN.csv ...]

Implementations missing from the runs (e.g. an sm80 run with --impls
flashattn,sdpa_flash) are left out of the cells and ratio columns.
"""
import collections
import csv
import statistics
import sys

IMPLS = ("flashattn", "sdpa_flash", "sdpa_cudnn")


def main():
    runs = []
    for path in sys.argv[1:]:
        cells = {}
        with open(path) as f:
            rows = csv.reader(line for line in f if not line.startswith("#"))
            header = next(rows)
            col = {name: i for i, name in enumerate(header)}
            for r in rows:
                key = (r[col["pass"]], int(r[col["hdim"]]), int(r[col["causal"]]), int(r[col["seqlen"]]))
                cells[(r[col["impl"]],) + key] = float(r[col["tflops"]])
        runs.append(cells)
    present = [i for i in IMPLS if any(k[0] == i for run in runs for k in run)]
    peers = [i for i in present if i != "flashattn"]
    names = {"sdpa_flash": "FA2", "sdpa_cudnn": "cuDNN"}
    shapes = sorted({k[1:] for run in runs for k in run}, key=lambda k: (k[0] != "fwd", k[0], k[1], k[2], k[3]))
    rows = collections.OrderedDict()
    for p, h, c, s in shapes:
        rows.setdefault((p, h, c), []).append(s)
    print(f"# {len(runs)} runs: " + " ".join(sys.argv[1:]))
    print("| hdim | causal | pass | " + " | ".join(str(s) for s in rows[next(iter(rows))]) + " | " +
          " | ".join(f"vs {names[peer]}" for peer in peers) + " |")
    for (p, h, c), seqs in rows.items():
        cells, ratios = [], {peer: [] for peer in peers}
        for s in seqs:
            key = (p, h, c, s)
            med = {i: statistics.median([run[(i,) + key] for run in runs if (i,) + key in run]) for i in present}
            cells.append(" / ".join(f"{med[i]:.0f}" for i in present))
            for peer in ratios:
                ratios[peer].append(statistics.median(
                    [run[("flashattn",) + key] / run[(peer,) + key] for run in runs
                     if ("flashattn",) + key in run and (peer,) + key in run]))
        print(f"| {h} | {'yes' if c else 'no'} | {p} | " + " | ".join(cells) + " | " +
              " | ".join(f"{min(r):.2f}–{max(r):.2f}×" for r in ratios.values()) + " |")


if __name__ == "__main__":
    main()
