#!/usr/bin/env python3
"""What clearing the rows past cu_seqlens[batch] costs a varlen call
(src/common/varlen_tail.hpp, src/cuda/varlen_tail.cu: one small kernel after
every CUDA varlen call). Device time per call (bench/gpu/timing.kernel_time,
median of 30 calls): for the forward the span from the call's first kernel
start to its last kernel end (it counts an overlap of grids once); for
forward + backward the sum of the kernels' times (a span there would hold
autograd's host time between the passes). bf16, 32 / 8 heads, head dim 128,
on small calls where a few microseconds show:

  decode   8 sequences x 1 query token against 2k keys each (flash_attn_varlen_func)
  prefill  8 sequences x 256 tokens, causal, forward and forward + backward

each with the packed tensors ending at the last sequence (tail 0) and with 64
rows past it (tail 64). Run it once per library (FLASHATTN_LIBRARY) and
compare the rows:

  FLASHATTN_LIBRARY=.../libflashattn.so PYTHONPATH=python python3 bench/gpu/bench_varlen_tail.py OUT.csv

CSV: lib,shape,pass,tail,us (device time per call, microseconds)
"""
import os
import sys

import torch

import flashattn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import kernel_time  # noqa: E402

HQ, HKV, D = 32, 8, 128


def cu(lens):
    c = [0]
    for n in lens:
        c.append(c[-1] + n)
    return torch.tensor(c, dtype=torch.int32, device="cuda")


def case(lens_q, lens_k, tail, causal, backward):
    tq, tk = sum(lens_q) + tail, sum(lens_k) + tail
    g = torch.Generator(device="cuda").manual_seed(tq * 7 + tk)
    q = torch.randn(tq, HQ, D, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_(backward)
    k = torch.randn(tk, HKV, D, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_(backward)
    v = torch.randn(tk, HKV, D, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_(backward)
    cq, ck = cu(lens_q), cu(lens_k)
    dout = torch.randn(tq, HQ, D, device="cuda", dtype=torch.bfloat16, generator=g)

    def fn():
        out = flashattn.flash_attn_varlen_func(q, k, v, cq, ck, max(lens_q), max(lens_k), causal=causal)
        if backward:
            torch.autograd.grad(out, (q, k, v), dout)

    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    _, ms = kernel_time(fn, reps=30, span=not backward)
    return ms * 1000.0


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else ""
    lib = os.environ.get("FLASHATTN_LIBRARY", "")
    rows = ["lib,shape,pass,tail,us"]
    for tail in (0, 64):
        for name, lq, lk, causal, passes in (("decode", [1] * 8, [2048] * 8, False, ("fwd",)),
                                             ("prefill", [256] * 8, [256] * 8, True, ("fwd", "fwd+bwd"))):
            for ps in passes:
                us = case(lq, lk, tail, causal, ps == "fwd+bwd")
                rows.append(f"{lib},{name},{ps},{tail},{us:.2f}")
                print(rows[-1], flush=True)
    if out:
        with open(out, "w") as f:
            f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
