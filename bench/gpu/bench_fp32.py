#!/usr/bin/env python3
"""fp32 attention on the GPU: flashattn's fp32 kernels (src/cuda/f32, CUDA
cores, exact fp32) against torch SDPA's fp32 backends in the same process.

  FLASHATTN_LIBRARY=.../libflashattn.so PYTHONPATH=python python3 bench/gpu/bench_fp32.py OUT.csv
      [--impls flashattn,sdpa_efficient] [--hdims 128] [--seqlens 1024,4096] [--no-accuracy]
      [--label v3]

(--label adds a column naming the library, for A/B runs of several builds
whose CSVs are later read together.)

Peers: SDPA's memory-efficient backend (the only fused SDPA kernel that takes
fp32) and its math backend (materialises the N x N scores; TF32 off, as
torch's default for matmuls). Shapes: DESIGN.md's grid cut to seqlen 512-4k
(16k tokens per batch, hidden 2048), head dims 64 / 128 / 256, causal and
not; forward and forward+backward (autograd). CUDA events, median of 20 after
5 warm-ups (timing.py). TFLOP/s: 4 B H S^2 d per forward (halved causal),
x 3.5 for forward+backward.

Accuracy (same run): max |out - fp64| and max |dq - fp64| of each
implementation at batch 1, 4 heads, seqlen 1k, against torch's float64 math
attention on the same (fp32-representable) inputs.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

SEQLENS = (512, 1024, 2048, 4096)
HDIMS = (64, 128, 256)


def main():
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default="")
    ap.add_argument("--impls", default="flashattn,sdpa_efficient,sdpa_math")
    ap.add_argument("--hdims", default=",".join(map(str, HDIMS)))
    ap.add_argument("--seqlens", default=",".join(map(str, SEQLENS)))
    ap.add_argument("--no-accuracy", action="store_true")
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    hdims = [int(x) for x in args.hdims.split(",")]
    seqlens = [int(x) for x in args.seqlens.split(",")]

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from flashattn import flash_attn_func
    from timing import median_ms

    torch.backends.cuda.matmul.allow_tf32 = False
    out_path = args.out
    gen = torch.Generator(device="cuda").manual_seed(0)

    def sdpa(backend):
        def f(q, k, v, causal):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                      is_causal=causal).transpose(1, 2)
        return f

    all_impls = {
        "flashattn": lambda q, k, v, causal: flash_attn_func(q, k, v, causal=causal),
        "sdpa_efficient": sdpa(SDPBackend.EFFICIENT_ATTENTION),
        "sdpa_math": sdpa(SDPBackend.MATH),
    }
    impls = {name: all_impls[name] for name in args.impls.split(",")}
    label = f",{args.label}" if args.label else ""
    lines = [f"# torch {torch.__version__}, {torch.cuda.get_device_name()}",
             "impl,hdim,causal,seqlen,pass,ms,tflops" + (",label" if label else "")]
    print(lines[0], flush=True)
    for d in hdims:
        for causal in (False, True):
            for s in seqlens:
                b, h = 16384 // s, 2048 // d
                q, k, v, do = (torch.randn(b, s, h, d, device="cuda", dtype=torch.float32, generator=gen)
                               for _ in range(4))
                flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
                for name, f in impls.items():
                    def fwd(f=f):
                        with torch.no_grad():
                            f(q, k, v, causal)

                    def fwd_bwd(f=f):
                        a, bb, c = (x.detach().requires_grad_(True) for x in (q, k, v))
                        f(a, bb, c, causal).backward(do)

                    for pname, fn, mult in (("fwd", fwd, 1.0), ("fwd+bwd", fwd_bwd, 3.5)):
                        try:
                            ms = median_ms(fn)
                        except (RuntimeError, torch.OutOfMemoryError) as e:
                            lines.append(f"# {name} d{d} causal={causal} s{s} {pname}: {str(e).splitlines()[0]}")
                            print(lines[-1], flush=True)
                            torch.cuda.empty_cache()
                            continue
                        lines.append(f"{name},{d},{int(causal)},{s},{pname},{ms:.4f},{mult * flops / ms / 1e9:.2f}{label}")
                        print(lines[-1], flush=True)
                del q, k, v, do
                torch.cuda.empty_cache()

    # Accuracy against float64 on one shape per head dim.
    for d in ([] if args.no_accuracy else hdims):
        for causal in (False, True):
            q, k, v, do = (torch.randn(1, 1024, 4, d, device="cuda", dtype=torch.float32, generator=gen)
                           for _ in range(4))
            q64, k64, v64 = (x.double().requires_grad_(True) for x in (q, k, v))
            ref = F.scaled_dot_product_attention(q64.transpose(1, 2), k64.transpose(1, 2), v64.transpose(1, 2),
                                                 is_causal=causal).transpose(1, 2)
            ref.backward(do.double())
            for name, f in impls.items():
                a, bb, c = (x.detach().requires_grad_(True) for x in (q, k, v))
                o = f(a, bb, c, causal)
                o.backward(do)
                eo = (o.double() - ref).abs().max().item()
                eq = (a.grad.double() - q64.grad).abs().max().item()
                lines.append(f"# accuracy {name} d{d} causal={int(causal)}: max|out-fp64| {eo:.3e}, "
                             f"max|dq-fp64| {eq:.3e} (max|ref| {ref.abs().max().item():.3f}, "
                             f"{q64.grad.abs().max().item():.3f})")
                print(lines[-1], flush=True)
    if out_path:
        with open(out_path, "w") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
