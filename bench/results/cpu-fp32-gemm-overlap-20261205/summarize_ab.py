"""lib_ab.txt -> per shape and pass: base / new medians (ms) over the rounds, new / base time ratio per round."""
import collections, statistics as st, sys
rows = collections.defaultdict(lambda: collections.defaultdict(dict))
for line in open(sys.argv[1] if len(sys.argv) > 1 else "lib_ab.txt"):
    if "[" not in line: continue
    head, rest = line.split("[", 1)
    shape, tail = rest.split("]", 1)
    r, v = head.split()[:2]
    pas, ms, gf = tail.split()
    rows[(shape, pas)][v][int(r)] = float(ms)
print(f"{'shape':<52} {'pass':<8} {'base ms':>8} {'new ms':>8} {'new/base':>8}  per round")
for (shape, pas), d in rows.items():
    rs = sorted(set(d["base"]) & set(d["new"]))
    ratios = [d["new"][r] / d["base"][r] for r in rs]
    print(f"{shape:<52} {pas:<8} {st.median(d['base'].values()):8.1f} {st.median(d['new'].values()):8.1f} "
          f"{st.median(ratios):8.3f}  {' '.join(f'{x:.3f}' for x in ratios)}")
