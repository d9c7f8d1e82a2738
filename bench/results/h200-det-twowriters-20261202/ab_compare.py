"""Per shape: medians over rounds of (a) default TFLOP/s of each setting / setting 0,
(b) det / default within each process, (c) det of setting 2 / setting 1."""
import csv, glob, os, statistics, sys, collections
runs = collections.defaultdict(dict)  # (round, setting) -> {(impl, shape): tf}
for path in glob.glob(os.path.join(sys.argv[1], "**", "ab-r*-s*.csv"), recursive=True):
    rnd = path.split(os.sep)[-2]
    s = int(path.rsplit("-s", 1)[1].split(".")[0])
    for line in open(path):
        if line.startswith("#") or line.startswith("impl"): continue
        r = line.strip().split(",")
        runs[(rnd, s)][(r[0], (int(r[2]), int(r[4]), int(r[3])))] = float(r[8])
rounds = sorted({k[0] for k in runs}); shapes = sorted({sh for d in runs.values() for (_, sh) in d})
med = lambda v: f"{statistics.median(v):.2f} [{min(v):.2f}-{max(v):.2f}]" if v else "-"
print(f"rounds {rounds}")
print("hd,causal,N | default s1/s0 | default s2/s0 | det s1/s0 | det s2/s1 | det/def s0 | det/def s1 | det/def s2 | det TF s1 -> s2")
for sh in shapes:
    g = lambda rnd, s, i: runs[(rnd, s)].get((i, sh))
    c = []
    c.append(med([g(r,1,'flashattn')/g(r,0,'flashattn') for r in rounds]))
    c.append(med([g(r,2,'flashattn')/g(r,0,'flashattn') for r in rounds]))
    c.append(med([g(r,1,'flashattn_det')/g(r,0,'flashattn_det') for r in rounds]))
    c.append(med([g(r,2,'flashattn_det')/g(r,1,'flashattn_det') for r in rounds]))
    for s in (0,1,2): c.append(med([g(r,s,'flashattn_det')/g(r,s,'flashattn') for r in rounds]))
    c.append(f"{statistics.median([g(r,1,'flashattn_det') for r in rounds]):.0f} -> {statistics.median([g(r,2,'flashattn_det') for r in rounds]):.0f}")
    print(f"{sh[0]},{sh[1]},{sh[2]} | " + " | ".join(c))
