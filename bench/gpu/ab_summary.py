"""Summary of bench/gpu/env_ab.sh runs: per shape and setting, flashattn's
TFLOP/s in each round (median first), and its ratio to cuDNN measured in
the same process (median over the rounds).

  python3 bench/gpu/ab_summary.py OUTDIR [--impl flashattn] [--peer sdpa_cudnn]
"""
import argparse
import collections
import csv
import glob
import os
import statistics


def read(path):
    setting, rows = "?", []
    with open(path) as f:
        for line in f:
            if line.startswith("# setting:"):
                setting = line.split(":", 1)[1].strip()
            elif line.startswith("#") or line.startswith("impl,"):
                continue
            else:
                rows.append(next(csv.reader([line.split("#")[0]])))
    return setting, rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--impl", default="flashattn")
    ap.add_argument("--peer", default="sdpa_cudnn")
    a = ap.parse_args()
    tf = collections.defaultdict(list)     # (setting, shape) -> [tflops per round]
    ratio = collections.defaultdict(list)  # (setting, shape) -> [impl / peer per round]
    order = []
    for path in sorted(glob.glob(os.path.join(a.outdir, "ab-r*-s*.csv"))):
        setting, rows = read(path)
        if setting not in order:
            order.append(setting)
        proc = {}
        for r in rows:
            impl, mode, d, n, c = r[0], r[1], int(r[2]), int(r[3]), int(r[4])
            proc[(impl, (mode, d, n, c))] = float(r[8])
        for (impl, shape), v in proc.items():
            if impl != a.impl:
                continue
            tf[(setting, shape)].append(v)
            peer = proc.get((a.peer, shape))
            if peer:
                ratio[(setting, shape)].append(v / peer)
    shapes = sorted({s for (_, s) in tf})
    print("pass,hdim,seqlen,causal," + ",".join(f'"{s}" TFLOP/s (rounds),"{s}" / {a.peer}' for s in order))
    for shape in shapes:
        cells = []
        for s in order:
            v = tf.get((s, shape), [])
            rr = ratio.get((s, shape), [])
            cells.append(f'"{statistics.median(v):.0f} ({" ".join(f"{x:.0f}" for x in v)})"' if v else "")
            cells.append(f"{statistics.median(rr):.2f}" if rr else "")
        print(",".join(str(x) for x in shape) + "," + ",".join(cells))


if __name__ == "__main__":
    main()
