"""One KV-cache decode step under a profiler: flash_attn_with_kvcache at one
(batch, context) of bench_decode.py's grid (64 / 8 heads, head dim 128, bf16,
one query token), a few warm-up calls, then --calls profiled ones.

  ncu --kernel-name regex:"fwd_kernel|combine_kernel" --launch-skip 6 --launch-count 2 \\
      python3 bench/gpu/ncu_decode_step.py --batch 1 --context 8192
"""
import argparse

import torch

import flashattn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--context", type=int, default=8192)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--calls", type=int, default=4, help="calls after 3 warm-up calls")
    a = ap.parse_args()
    g = torch.Generator(device="cuda").manual_seed(0)
    kc, vc = (torch.randn(a.batch, a.context, 8, a.head_dim, device="cuda", dtype=torch.bfloat16, generator=g)
              for _ in range(2))
    q = torch.randn(a.batch, 1, 64, a.head_dim, device="cuda", dtype=torch.bfloat16, generator=g)
    lens = torch.full((a.batch,), a.context, dtype=torch.int32, device="cuda")
    for _ in range(3 + a.calls):
        flashattn.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
