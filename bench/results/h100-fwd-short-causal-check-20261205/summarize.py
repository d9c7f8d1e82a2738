"""run2/: medians over three alternated rounds of bench_short_calls.py, B (default) / A
(FLASHATTN_SM90_HD128_BLOCKM=192), stream_ms (20 queued calls) and kernel_ms (profiler)."""
import csv, glob, os, statistics as st
here = os.path.dirname(os.path.abspath(__file__))
d = {}
for f in sorted(glob.glob(os.path.join(here, "run2", "knob-*-r*.csv"))):
    v = os.path.basename(f).split("-")[1]
    for row in csv.DictReader(l for l in open(f) if not l.startswith("#")):
        d.setdefault((row["impl"], v, row["seqlen"]), []).append((float(row["stream_ms"]), float(row["kernel_ms"])))
for n in ("512", "1024", "2048"):
    for impl in ("flashattn", "sdpa_cudnn"):
        a, b = d[(impl, "A", n)], d[(impl, "B", n)]
        med = lambda xs, i: st.median(x[i] for x in xs)
        print(f"{n:>5} {impl:<10} stream A {[x[0] for x in a]} B {[x[0] for x in b]} B/A {med(b,0)/med(a,0):.3f}"
              f" | kernel B/A {med(b,1)/med(a,1):.3f}")
