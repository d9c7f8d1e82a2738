# Emulation of the fp8 forward's P rounding (forty-fifth session): random e4m3 q, k, v as in
# tests/fp8_test.cpp (sigma 8, the test's descales), batch 1 x 113 x 267, one head, 8 trials;
# key tiles of 128 visited from the last, the lazy reference (kept while p <= 2^8, else moved
# to the row max), P rounded to e4m3 (RN, 3 mantissa bits, subnormals from 2^-6, max 448).
# Prints the max-error ratios of the emulated kernel to the naive rounding at the row max,
# and to the worst of the naive at lags 0 / 1.5 / 4.25 / 7.75 log2 units (naive_forward_fp8).
#   .venv/bin/python fp8_lag_emulation.py SEED HEAD_DIM
import numpy as np, sys
def e4m3_round(x):
    # round to e4m3 (3 mantissa bits, min normal 2^-6, subnormal step 2^-9, max 448), RN-even, x >= 0
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros_like(x)
    nz = x > 0
    e = np.floor(np.log2(np.where(nz, x, 1.0)))
    e = np.maximum(e, -6)
    step = 2.0 ** (e - 3)
    out = np.where(nz, np.round(x / step) * step, 0.0)   # np.round: half to even
    return np.minimum(out, 448.0)
def bf16(x):
    x = np.asarray(x, dtype=np.float32).copy()
    u = x.view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32).astype(np.float64)
rng = np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
Sq, Sk, D, BN = 113, 267, int(sys.argv[2]) if len(sys.argv) > 2 else 128, 128
ratios_lag, ratios_exact = [], []
for trial in range(8):
    q = e4m3_round(np.abs(rng.normal(0, 8, (Sq, D)))) * np.sign(rng.normal(size=(Sq, D))) * 0.125
    k = e4m3_round(np.abs(rng.normal(0, 8, (Sk, D)))) * np.sign(rng.normal(size=(Sk, D))) * 0.1171875
    v = e4m3_round(np.abs(rng.normal(0, 8, (Sk, D)))) * np.sign(rng.normal(size=(Sk, D))) * 0.2109375
    s = (q @ k.T) / np.sqrt(D)
    ref = np.exp(s - s.max(1, keepdims=True)); ref = (ref / ref.sum(1, keepdims=True)) @ v
    # naive: P rounded relative to the exact max
    p = np.exp(s - s.max(1, keepdims=True)); l = p.sum(1, keepdims=True)
    naive = bf16((e4m3_round(p) @ v) / l)
    en_lags = []
    for lag in (0.0, 1.5, 4.25, 7.75):
        pl = p * 2.0**lag
        en_lags.append(np.abs(bf16((e4m3_round(pl) @ v) / (l * 2.0**lag)) - ref).max())
    # kernel emulation: tiles from the last, lazy reference within 2^8, moved to the row max when it fails
    L2E = 1.4426950408889634
    out = np.zeros((Sq, D))
    for i in range(Sq):
        m = None; o = np.zeros(D); lsum = 0.0
        tiles = [(t, min(t + BN, Sk)) for t in range(0, Sk, BN)][::-1]
        for a, b in tiles:
            st = s[i, a:b]
            if m is None:
                m = st.max(); pp = np.exp(st - m); o += e4m3_round(pp) @ v[a:b]; lsum += pp.sum(); continue
            pp = np.exp2((st - m) * L2E)
            if pp.max() <= 256.0:
                o += e4m3_round(pp) @ v[a:b]; lsum += pp.sum()
            else:
                mn = max(m, st.max()); corr = np.exp(m - mn); m = mn
                o *= corr; lsum *= corr
                pp = np.exp(st - m); o += e4m3_round(pp) @ v[a:b]; lsum += pp.sum()
        out[i] = bf16(o / lsum)
    en = np.abs(naive - ref).max(); ek = np.abs(out - ref).max()
    ratios_lag.append(ek / en); ratios_exact.append(ek / max(en_lags))
print(D, 'kernel-emulation / naive:', ' '.join('%.2f' % r for r in ratios_lag), '| / worst lagged naive:', ' '.join('%.2f' % r for r in ratios_exact))
