#!/usr/bin/env python3
"""Softcap and ALiBi on the H200: what they cost, and the Hopper kernels against the sm80 ones.

  FLASHATTN_LIBRARY=.../libflashattn.so PYTHONPATH=python python3 bench/gpu/bench_softcap.py OUT.csv

DESIGN.md's grid (16k tokens per batch, hidden 2048: batch = 16384 / seqlen,
heads = 2048 / hdim), bf16, causal and not, at seqlens 2k / 8k / 16k. Rows:
`plain` (flash_attn_func, no softcap), `softcap` (softcap = 30, the default
dispatch: the Hopper kernels), `alibi` (ALiBi slopes 2^(-8 (h + 1) / H) per
head, as the ALiBi paper's), and, in a second process with
FLASHATTN_DISABLE_SM90=1, `softcap_sm80` and `alibi_sm80` (the sm80 kernels
every GPU runs them on without the Hopper path). torch SDPA has neither
softcap nor ALiBi slopes in its fused kernels, so there is no cuDNN row. Passes: `fwd` (no autograd) and `fwd+bwd` (forward with
requires_grad, then backward of a fixed dO through autograd; FLOPs 3.5x the
forward's). CUDA events, median of 20 calls after 5 warm-ups
(bench/gpu/timing.py); TFLOP/s are the attention's 4 B H S^2 d (halved for
causal), not counting the tanh.

Before timing, each process checks its softcap output against a float64
softcapped attention on a slice (batch 0, heads 0-1) and prints the max error.

CSV: impl,pass,hdim,seqlen,causal,batch,heads,ms,tflops
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
CAP = 30.0


def reference(q, k, v, causal, cap):
    import torch

    q, k, v = (x.double().transpose(1, 2) for x in (q, k, v))  # [B, H, S, D]
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    s = cap * torch.tanh(s / cap)
    if causal:
        sq, sk = s.shape[-2], s.shape[-1]
        keep = torch.ones(sq, sk, dtype=torch.bool, device=s.device).tril(sk - sq)
        s = s.masked_fill(~keep, float("-inf"))
    return (torch.softmax(s, -1) @ v).transpose(1, 2)


def child(impls, hdims):
    import torch

    from flashattn import flash_attn_func
    from timing import median_ms

    rows = []
    gen = torch.Generator(device="cuda").manual_seed(0)
    for d in hdims:
        for S in (2048, 8192, 16384):
            B, H = 16384 // S, 2048 // d
            q, k, v, do = (torch.randn(B, S, H, d, device="cuda", dtype=torch.bfloat16, generator=gen)
                           for _ in range(4))
            for causal in (False, True):
                if S == 2048:  # one accuracy check per head dim and mask
                    sl = (slice(0, 1), slice(None), slice(0, 2))
                    got = flash_attn_func(q[sl], k[sl], v[sl], causal=causal, softcap=CAP).double()
                    err = (got - reference(q[sl], k[sl], v[sl], causal, CAP)).abs().max().item()
                    print(f"# check hdim={d} causal={int(causal)} softcap={CAP}: max|out - fp64| = {err:.3g}",
                          flush=True)
                fl = 4 * B * H * S * S * d / (2 if causal else 1)
                slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / H) for h in range(H)], device="cuda",
                                      dtype=torch.float32)
                for impl in impls:
                    cap = CAP if impl.startswith("softcap") else 0.0
                    al = slopes if impl.startswith("alibi") else None

                    def fwd(cap=cap, al=al):
                        with torch.no_grad():
                            flash_attn_func(q, k, v, causal=causal, softcap=cap, alibi_slopes=al)

                    def fwd_bwd(cap=cap, al=al):
                        a, b, c = (x.detach().requires_grad_(True) for x in (q, k, v))
                        flash_attn_func(a, b, c, causal=causal, softcap=cap, alibi_slopes=al).backward(do)

                    for pname, f, mult in (("fwd", fwd, 1.0), ("fwd+bwd", fwd_bwd, 3.5)):
                        ms = median_ms(f)
                        rows.append(f"{impl},{pname},{d},{S},{int(causal)},{B},{H},{ms:.4f},"
                                    f"{mult * fl / ms / 1e9:.1f}")
                        print(rows[-1], flush=True)
            del q, k, v, do
            torch.cuda.empty_cache()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default="")
    ap.add_argument("--child", default="")
    ap.add_argument("--hdims", default="64,128,256")
    ap.add_argument("--impls", default="plain,softcap,alibi", help="Hopper-dispatch rows")
    ap.add_argument("--no-sm80", action="store_true", help="skip the FLASHATTN_DISABLE_SM90=1 process")
    a = ap.parse_args()
    if a.child:
        child(a.child.split(","), [int(x) for x in a.hdims.split(",")])
        return
    lines = ["impl,pass,hdim,seqlen,causal,batch,heads,ms,tflops"]
    runs = [(a.impls, {})]
    if not a.no_sm80:
        runs.append(("softcap_sm80,alibi_sm80", {"FLASHATTN_DISABLE_SM90": "1"}))
    for impls, env in runs:
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", impls, "--hdims", a.hdims],
                           env=dict(os.environ, **env), capture_output=True, text=True, timeout=300)
        for ln in p.stdout.splitlines():
            print(ln, flush=True)
            lines.append(ln)
        if p.returncode:
            print(p.stderr[-2000:], file=sys.stderr)
            lines.append(f"# {impls}: exit {p.returncode}")
    if a.out:
        with open(a.out, "w") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
