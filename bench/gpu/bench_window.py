#!/usr/bin/env python3
"""Sliding-window cost on the GPU (issue 9: "windowed attention's time proportional to the window").

  FLASHATTN_LIBRARY=.../libflashattn.so PYTHONPATH=python python3 bench/gpu/bench_window.py OUT.csv

One shape, bf16, head dim 128, 16k tokens (batch 1, 16 heads), causal sliding
windows window_size = (w, 0) for w = 128 ... 16384, forward and forward+backward
(autograd), CUDA events, median of 20 after 5 warm-ups (bench/gpu/timing.py).
Each query sees min(i, w) + 1 keys, so the work is ~ S (w + 1) - w (w + 1) / 2
key pairs. The script fits time = a + b * pairs by least squares over the windows
and prints R^2 and the fitted intercept, per pass: time proportional to the window
means a straight line through (nearly) the origin, not a cost that stays with S^2.

CSV: pass,window,pairs,ms,tflops_effective (FLOPs of the visited pairs only: 4 d per pair, x 3.5 for fwd+bwd)
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

S, H, D = 16384, 16, 128
WINDOWS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)


def main():
    import torch

    from flashattn import flash_attn_func
    from timing import median_ms

    out = sys.argv[1] if len(sys.argv) > 1 else ""
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, do = (torch.randn(1, S, H, D, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(4))
    lines = ["pass,window,pairs,ms,tflops_effective"]
    fits = {}
    for pname, mult in (("fwd", 1.0), ("fwd+bwd", 3.5)):
        xs, ys = [], []
        for w in WINDOWS:
            pairs = sum(min(i, w) + 1 for i in range(S)) * H

            def fwd(w=w):
                with torch.no_grad():
                    flash_attn_func(q, k, v, causal=True, window_size=(w, 0))

            def fwd_bwd(w=w):
                a, b, c = (x.detach().requires_grad_(True) for x in (q, k, v))
                flash_attn_func(a, b, c, causal=True, window_size=(w, 0)).backward(do)

            ms = median_ms(fwd if pname == "fwd" else fwd_bwd)
            xs.append(float(pairs))
            ys.append(ms)
            lines.append(f"{pname},{w},{pairs},{ms:.4f},{mult * 4 * D * pairs / ms / 1e9:.1f}")
            print(lines[-1], flush=True)
        n = len(xs)
        mx, my = sum(xs) / n, sum(ys) / n
        b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        a = my - b * mx
        ss_res = sum((y - (a + b * x)) ** 2 for x, y in zip(xs, ys))
        ss_tot = sum((y - my) ** 2 for y in ys)
        fits[pname] = (a, b, 1 - ss_res / ss_tot, ys[-1])
    for pname, (a, b, r2, full) in fits.items():
        lines.append(f"# fit {pname}: ms = {a:.4f} + {b * 1e9:.4f}e-9 * pairs, R^2 = {r2:.4f}; "
                     f"intercept = {100 * a / full:.1f}% of the full causal call")
        print(lines[-1], flush=True)
    if out:
        with open(out, "w") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
