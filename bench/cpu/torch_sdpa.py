"""PyTorch CPU scaled_dot_product_attention on the grid of bench_cpu, same CSV columns.

python3 torch_sdpa.py --hdims 64,128,256 --seqlens 512,...,8192 --threads 2
"""
import argparse
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def timed(fn, repeat, warmup=1):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), min(ts), max(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hdims", default="64,128,256")
    ap.add_argument("--seqlens", default="512,1024,2048,4096,8192")
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--heads", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-backward", action="store_true")
    a, _ = ap.parse_known_args()  # bench_cpu-only flags (--no-naive, ...) are ignored
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    ints = lambda s: [int(x) for x in s.split(",") if x]
    tdt = {"fp32": torch.float32, "bf16": torch.bfloat16}
    print(f"# torch {torch.__version__}, threads {torch.get_num_threads()}", file=sys.stderr)
    for d in ints(a.hdims):
        for s in ints(a.seqlens):
            b, h = 1, a.heads or max(1, 512 // d)
            for c in ints(a.causal):
                fwd_flops = 4 * b * h * s * s * d / (2 if c else 1)
                for name in a.dtypes.split(","):
                    # SDPA takes [B, H, S, D]; the transpose of a BSHD tensor, as users call it.
                    q, k, v = (torch.randn(b, s, h, d, dtype=tdt[name]).transpose(1, 2).requires_grad_()
                               for _ in range(3))
                    f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=bool(c))
                    with torch.no_grad():
                        med, lo, hi = timed(f, a.repeat)
                    print(f"torch_sdpa,fwd,{name},{d},{s},{c},{b},{h},{a.threads},{med*1e3:.3f},{lo*1e3:.3f},{hi*1e3:.3f},{fwd_flops/med*1e-9:.1f}", flush=True)
                    if a.no_backward:
                        continue
                    o = f()
                    g = torch.randn_like(o)
                    med, lo, hi = timed(lambda: torch.autograd.grad(o, (q, k, v), g, retain_graph=True), a.repeat)
                    print(f"torch_sdpa,bwd,{name},{d},{s},{c},{b},{h},{a.threads},{med*1e3:.3f},{lo*1e3:.3f},{hi*1e3:.3f},{2.5*fwd_flops/med*1e-9:.1f}", flush=True)


if __name__ == "__main__":
    main()
