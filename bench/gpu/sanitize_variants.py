#!/usr/bin/env python3
"""ALiBi + dropout on CUDA tensors through every sm80 head-dim tile, fp16 and
bf16, forward + backward (deterministic and not): launches the sm80 VAR kernel
instantiations (fwd_kernel<..., VAR>, bwd_kernel<..., VAR>, bwd_dq_kernel<...,
VAR>) for bench/gpu/h200_sanitize_all.sh, which runs this file under each
compute-sanitizer tool and under ncu. Small odd shapes, GQA, causal and not.
Exit status 1 when a call fails (a refusal of the options is reported, exit 0:
a build without CUDA ALiBi/dropout has no VAR kernels to cover)."""

import sys

import torch

import flashattn
from flashattn import flash_attn_func

torch.manual_seed(0)
dev = torch.device("cuda")
bad = 0
for dt in (torch.float16, torch.bfloat16):
    for i, d in enumerate((64, 72, 128, 160, 256)):  # tiles 64, 96, 128, 192, 256
        B, Sq, Sk, Hq, Hkv = 1, 67, 45 + 8 * i, 4, 2
        q = torch.randn(B, Sq, Hq, d, device=dev, dtype=dt, requires_grad=True)
        k = torch.randn(B, Sk, Hkv, d, device=dev, dtype=dt, requires_grad=True)
        v = torch.randn(B, Sk, Hkv, d, device=dev, dtype=dt, requires_grad=True)
        slopes = torch.rand(Hq, device=dev, dtype=torch.float32) * 0.5
        for det in (False, True):
            causal = (i + det) % 2 == 1
            try:
                res = flash_attn_func(q, k, v, dropout_p=0.15, alibi_slopes=slopes, causal=causal,
                                      deterministic=det, return_attn_probs=(i == 0))
                out = res[0] if isinstance(res, tuple) else res
                out.backward(torch.randn_like(out))
                torch.cuda.synchronize()
                ok = all(torch.isfinite(t.grad).all().item() for t in (q, k, v))
                print(f"{dt} d{d} det={det} causal={causal}: {'ok' if ok else 'NON-FINITE GRADIENT'}")
                bad += not ok
            except (NotImplementedError, flashattn.UnsupportedError) as e:
                print(f"{dt} d{d}: refused ({str(e).splitlines()[0][:120]})")
            except Exception as e:  # noqa: BLE001 - report and go on
                print(f"{dt} d{d} det={det}: FAILED {type(e).__name__}: {str(e).splitlines()[0][:160]}")
                bad += 1
            q.grad = k.grad = v.grad = None
sys.exit(1 if bad else 0)
