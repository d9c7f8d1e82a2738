"""What the KV-cache call's optional inputs cost on the GPU: one decode step
(1 query token, 1 appended token, 64 / 8 heads, head dim 128, bf16) of
flash_attn_with_kvcache

  append        k / v appended, no rotary (the baseline)
  rope_fused    + rotary_cos / rotary_sin (GPT-NeoX pairs, rotary_dim 128): k
                rotated inside the append kernel, q by the same launch
  rope_torch    the same step with RoPE applied by torch ops first (what a
                caller without the fused inputs does: rotate q and k_new,
                then call without rotary_cos)
  leftpad_idx   append + cache_leftpad (a quarter of each cache) +
                cache_batch_idx (entries reversed)

over batch 1 / 8 / 64 and contexts 8k / 32k. Times: torch.profiler device
time of one call (timing.kernel_time span: first kernel start to last kernel
end, median of 20; for rope_torch the span covers torch's rotation kernels
too) and CUDA-event time of 50 calls queued back to back / 50 (host and
device overlap). Caches are one copy per shape (warm in L2 only below
~50 MB). The rotated outputs of rope_fused and rope_torch are compared
(max |difference|, printed and written).

  FLASHATTN_LIBRARY=.../libflashattn.so PYTHONPATH=python python3 bench/gpu/bench_kvcache_rotary.py out.csv
"""
import argparse
import datetime
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import cuda_time_ms, kernel_time  # noqa: E402

import flashattn  # noqa: E402
from flashattn import flash_attn_with_kvcache  # noqa: E402


def rope_tables(n, rd, dtype):
    pos = torch.arange(n, dtype=torch.float32, device="cuda")[:, None]
    freq = 10000.0 ** (-torch.arange(0, rd, 2, dtype=torch.float32, device="cuda") / rd)
    ang = pos * freq[None]
    return torch.cos(ang).to(dtype), torch.sin(ang).to(dtype)


def rope_torch(x, cos, sin, pos):
    """GPT-NeoX rotation of x [B, S, H, D] at positions pos [B, S] (fp32 math)."""
    c, s = cos[pos].float()[:, :, None], sin[pos].float()[:, :, None]
    h = c.shape[-1]
    x0, x1 = x[..., :h].float(), x[..., h:2 * h].float()
    y = torch.cat((x0 * c - x1 * s, x0 * s + x1 * c, x[..., 2 * h:].float()), dim=-1)
    return y.to(x.dtype)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--batches", default="1,8,64")
    ap.add_argument("--contexts", default="8192,32768")
    args = ap.parse_args()
    dt, hq, hk, d = torch.bfloat16, 64, 8, 128
    rows = ["impl,batch,context,kernel_us,stream_us,kernels"]
    print(f"# {torch.cuda.get_device_name()} torch {torch.__version__} {datetime.datetime.now().isoformat()}")
    for B in (int(x) for x in args.batches.split(",")):
        for ctx in (int(x) for x in args.contexts.split(",")):
            g = torch.Generator(device="cuda").manual_seed(B * 7 + ctx)
            cap = ctx + 64
            kc = torch.randn(B, cap, hk, d, device="cuda", dtype=dt, generator=g)
            vc = torch.randn(B, cap, hk, d, device="cuda", dtype=dt, generator=g)
            q = torch.randn(B, 1, hq, d, device="cuda", dtype=dt, generator=g)
            kn = torch.randn(B, 1, hk, d, device="cuda", dtype=dt, generator=g)
            vn = torch.randn(B, 1, hk, d, device="cuda", dtype=dt, generator=g)
            lens = torch.full((B,), ctx - 1, dtype=torch.int32, device="cuda")
            cos, sin = rope_tables(cap + 1, d, dt)
            pos = lens.long()[:, None]
            left = torch.full((B,), ctx // 4, dtype=torch.int32, device="cuda")
            idx = torch.arange(B - 1, -1, -1, dtype=torch.int32, device="cuda")
            calls = {
                "append": lambda: flash_attn_with_kvcache(q, kc, vc, kn, vn, cache_seqlens=lens),
                "rope_fused": lambda: flash_attn_with_kvcache(q, kc, vc, kn, vn, rotary_cos=cos, rotary_sin=sin,
                                                              cache_seqlens=lens, rotary_interleaved=False),
                "rope_torch": lambda: flash_attn_with_kvcache(rope_torch(q, cos, sin, pos), kc, vc,
                                                              rope_torch(kn, cos, sin, pos), vn, cache_seqlens=lens),
                "leftpad_idx": lambda: flash_attn_with_kvcache(q, kc, vc, kn, vn, cache_seqlens=lens,
                                                               cache_leftpad=left, cache_batch_idx=idx),
            }
            diff = (calls["rope_fused"]().float() - calls["rope_torch"]().float()).abs().max().item()
            for name, f in calls.items():
                names, k_ms = kernel_time(f, only=None, span=True)
                s_ms = cuda_time_ms(f, iters=50)
                k_us = k_ms * 1e3 if k_ms is not None else float("nan")
                rows.append(f"{name},{B},{ctx},{k_us:.2f},{s_ms * 1e3:.2f},{names}")
                print(f"{name:12s} B={B:3d} ctx={ctx:6d}  kernel {k_us:8.2f} us  stream {s_ms * 1e3:8.2f} us  [{names}]")
            print(f"  rope_fused vs rope_torch: max |out difference| {diff:.3g}")
            rows.append(f"# B={B} ctx={ctx} max|rope_fused - rope_torch| = {diff:.3g}")
    with open(args.out, "w") as fh:
        fh.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
