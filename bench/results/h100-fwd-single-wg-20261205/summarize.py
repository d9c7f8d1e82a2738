"""Per cell (hdim, seqlen, causal): flashattn kernel time under each setting (rounds as min-max),
cuDNN's over every process, and the ratio new / old of the per-setting medians.

  python3 summarize.py r/ [new old]   (the run's folder of <setting>-r<round>.csv; settings
                                       m64 and def unless named)
"""
import csv
import glob
import os
import statistics
import sys
from collections import defaultdict


def main():
    d = sys.argv[1]
    new, old = sys.argv[2:4] if len(sys.argv) >= 4 else ("m64", "def")
    t = defaultdict(list)  # (setting, hdim, seqlen, causal, impl) -> kernel µs per round
    for path in sorted(glob.glob(os.path.join(d, "*-r*.csv"))):
        if os.path.basename(path).startswith("peers-"):
            continue
        setting = os.path.basename(path).rsplit("-r", 1)[0]
        with open(path) as f:
            for row in csv.DictReader(line for line in f if not line.startswith("#")):
                key = (row["hdim"], row["seqlen"], row["causal"])
                impl = row["impl"]
                t[(setting if impl == "flashattn" else "cudnn",) + key].append(1e3 * float(row["kernel_ms"]))
    settings = sorted({k[0] for k in t if k[0] != "cudnn"})
    cells = sorted({k[1:] for k in t}, key=lambda k: (int(k[2]), int(k[0]), int(k[1])))
    rng = lambda v: f"{min(v):.0f}-{max(v):.0f}" if v else "-"
    print("| hdim | seqlen | causal | " + " | ".join(settings) + f" | cuDNN | {new}/{old} | {old}/cuDNN | {new}/cuDNN |")
    print("|---" * (len(settings) + 7) + "|")
    for c in cells:
        med = {s: statistics.median(t[(s,) + c]) for s in settings + ["cudnn"] if t[(s,) + c]}
        cols = [rng(t[(s,) + c]) for s in settings]
        r = lambda a, b: f"{med[a] / med[b]:.3f}" if a in med and b in med else "-"
        print(f"| {c[0]} | {c[1]} | {c[2]} | " + " | ".join(cols) + f" | {rng(t[('cudnn',) + c])} | "
              f"{r(new, old)} | {r(old, 'cudnn')} | {r(new, 'cudnn')} |")


if __name__ == "__main__":
    main()
