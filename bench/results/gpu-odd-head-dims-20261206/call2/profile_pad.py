"""Where a padded head dim's extra time goes (head dim 100 against 104, bf16, 16
heads, 16k tokens per batch): per-kernel device time of one forward and one
forward + backward (bench/gpu/timing.kernel_time, per_kernel), and the CUDA-event
time of each call, with the default memory pool (the library keeps 256 MiB) and
with a release threshold of 4 GiB set first (argv[1] = MiB, 0 = leave it)."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../../bench/gpu"))
import flashattn  # noqa: E402
from bench_head_dim_v import set_pool_release_threshold  # noqa: E402
from timing import kernel_time, median_ms  # noqa: E402

mb = int(sys.argv[1]) if len(sys.argv) > 1 else 0
if mb:
    set_pool_release_threshold(mb)
h = 16
for n in (1024, 16384):
    b = 16384 // n
    for d in (100, 104):
        mk = lambda: torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        q, k, v = mk(), mk(), mk()
        o = flashattn.flash_attn_func(q, k, v)
        g = torch.randn_like(o)
        fwd = lambda: flashattn.flash_attn_func(q, k, v)
        def fb():
            out = flashattn.flash_attn_func(q, k, v)
            torch.autograd.grad(out, (q, k, v), g)
        for name, f in (("fwd", fwd), ("fwd+bwd", fb)):
            ms = median_ms(f, repeat=20)
            per = kernel_time(f, reps=20, only=None, per_kernel=True)
            tot = sum(per.values()) if isinstance(per, dict) else float("nan")
            top = sorted(per.items(), key=lambda x: -x[1])[:8] if isinstance(per, dict) else per
            print(f"pool {mb} MiB  seqlen {n} d {d} {name}: event {ms:.3f} ms, kernels {tot:.3f} ms: " +
                  "; ".join(f"{k_[:60]} {v_:.3f}" for k_, v_ in top), flush=True)
