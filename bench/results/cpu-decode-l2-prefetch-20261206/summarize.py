"""Medians and ranges of flashattn's decode GB/s and fraction of the streaming read over the
base / new runs of bench_decode.py in this folder and run2/ (decode-*-{base,new}.csv; first-tile/
is a later A/B with other libraries).
  python3 summarize.py"""
import csv
import glob
import os
import statistics

here = os.path.dirname(os.path.abspath(__file__))
rows = {}
for path in sorted(glob.glob(os.path.join(here, "decode-*.csv")) + glob.glob(os.path.join(here, "run2", "decode-*.csv"))):
    tag = path.rsplit("-", 1)[1][:-4]
    with open(path) as fh:
        for r in csv.reader(line for line in fh if not line.startswith("#")):
            if r[0] != "flashattn":
                continue
            rows.setdefault((r[1], int(r[2]), tag), []).append((float(r[7]), float(r[8])))
print("dtype,context,runs,base_gbps_median,base_range,new_gbps_median,new_range,"
      "base_frac_median,new_frac_median,new_frac_range")
for dt in ("float32", "bfloat16"):
    for ctx in (1024, 4096, 16384, 65536):
        b, n = rows[(dt, ctx, "base")], rows[(dt, ctx, "new")]
        med = lambda v, i: statistics.median(x[i] for x in v)
        rng = lambda v, i: f"{min(x[i] for x in v):.2f}-{max(x[i] for x in v):.2f}"
        print(f"{dt},{ctx},{len(b)}/{len(n)},{med(b, 0):.1f},{rng(b, 0)},{med(n, 0):.1f},{rng(n, 0)},"
              f"{med(b, 1):.2f},{med(n, 1):.2f},{rng(n, 1)}")
