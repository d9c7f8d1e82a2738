#!/usr/bin/env python3
"""Where a kernel's warps wait, from ncu's source page (SASS with stall samples).

  ncu --import REP --page source --print-source sass --csv > sass.csv
  python3 bench/sm90/ncu_stalls.py sass.csv [top]

Prints the top instructions by warp-stall samples with their main stall
reasons, then the samples summed over the stretches between control points
(HGMMA, barriers, mbarrier waits, bulk reductions, branches), which shows
which phase of a step the time goes to. Used by bench/sm90/bwd_ncu.sh.
"""
import csv
import re
import sys


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    rows = list(csv.reader(open(path)))
    # The first row names the kernel; the second is the header.
    hdr, data = rows[1], rows[2:]
    src = hdr.index("Source")
    samples = hdr.index("Warp Stall Sampling (All Samples)")
    reasons = [i for i, h in enumerate(hdr) if h.startswith("stall_") and "Not Issued" not in h]
    n = [int(r[samples] or 0) for r in data]
    total = sum(n) or 1
    print(f"# {rows[0][1] if len(rows[0]) > 1 else ''}")
    print(f"# {total} samples over {len(data)} instructions")
    print("## top instructions (share of all samples; main reasons)")
    for k in sorted(range(len(data)), key=lambda k: -n[k])[:top]:
        why = sorted(((int(data[k][i] or 0), hdr[i][6:]) for i in reasons), reverse=True)[:2]
        why = ", ".join(f"{w} {c}" for c, w in why if c)
        print(f"{k:5d} {100 * n[k] / total:5.1f}%  {data[k][src].strip()[:64]:64s} {why}")
    print("## phases: samples from the previous control point up to this one")
    control = re.compile(r"HGMMA|BAR\.SYNC|BAR\.ARV|WARPGROUP\.DEPBAR|SYNCS\.PHASECHK|UBLKRED|EXIT")
    acc, start = 0, 0
    for k, r in enumerate(data):
        acc += n[k]
        s = r[src].strip()
        if control.search(s):
            if 100 * acc / total >= 0.5:
                print(f"{start:5d}-{k:5d} {100 * acc / total:5.1f}%  {s[:70]}")
            acc, start = 0, k + 1


if __name__ == "__main__":
    main()
