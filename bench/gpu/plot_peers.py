"""Plot bench_peers.py runs: TFLOP/s against seqlen, one line per implementation,
one panel per (pass, head dim, causal); with several runs of the same build each
point is the median over the runs and a bar spans their min .. max.

  python3 bench/gpu/plot_peers.py RUN.csv [RUN.csv ...] [--replace RUN.csv ...] OUT.png

--replace: the (implementation, pass, head dim, causal) series found in these runs
replace the same series of the first runs (e.g. a later kernel's rows in an
earlier grid, as the README's table does).
"""
import collections
import csv
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

LABELS = {"flashattn": "flashattn", "sdpa_flash": "SDPA FlashAttention-2", "sdpa_cudnn": "SDPA cuDNN"}


def read(paths):
    """(impl, pass, hdim, causal) -> seqlen -> [TFLOP/s of each run]."""
    data = collections.defaultdict(lambda: collections.defaultdict(list))
    for path in paths:
        with open(path) as f:
            for r in csv.DictReader(line for line in f if not line.startswith("#")):
                key = (r["impl"], r["pass"], int(r["hdim"]), int(r["causal"]))
                data[key][int(r["seqlen"])].append(float(r["tflops"]))
    return data


def device(paths):
    """The GPU named in the first run's "# device: NAME, driver ..." line (bench_peers.py)."""
    with open(paths[0]) as f:
        for line in f:
            if line.startswith("# device:"):
                return line[len("# device:"):].split(",")[0].strip().replace("NVIDIA ", "")
    return "GPU"


def main(paths, out, replace=()):
    data = read(paths)
    data.update(read(replace))
    panels = sorted({k[1:] for k in data}, key=lambda p: (p[0] != "fwd", p[1], p[2]))
    impls = [i for i in LABELS if any(k[0] == i for k in data)]
    cols = len({p[1:] for p in panels})
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.8 * rows), squeeze=False)
    for ax, (ps, hdim, causal) in zip(axes.flat, panels):
        for impl in impls:
            series = data.get((impl, ps, hdim, causal))
            if not series:
                continue
            xs = sorted(series)
            med = [statistics.median(series[x]) for x in xs]
            lo = [m - min(series[x]) for m, x in zip(med, xs)]
            hi = [max(series[x]) - m for m, x in zip(med, xs)]
            ax.errorbar(xs, med, yerr=[lo, hi], marker="o", ms=3, capsize=2, label=LABELS[impl])
        ax.set_xscale("log", base=2)
        ax.set_title(f"{ps} d{hdim} {'causal' if causal else 'non-causal'}", fontsize=9)
        ax.set_xlabel("seqlen", fontsize=8)
        ax.set_ylabel("TFLOP/s", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    runs = f"{len(paths)} run(s)" + (f", some series from {len(replace)} later run(s)" if replace else "")
    fig.suptitle(f"{device(paths)} bf16, {runs}: median, bars min..max", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) < 2 or args[-1] == "--replace":
        sys.exit(__doc__)
    cut = args.index("--replace") if "--replace" in args else len(args) - 1
    if cut == 0:
        sys.exit(__doc__)
    main(args[:cut], args[-1], args[cut + 1:-1])
