"""One backward call of flashattn and one of torch SDPA's flash backend
(FlashAttention-2) on the same tensors, for Nsight Compute to profile side by
side. DESIGN.md's grid shape: batch 16384 / seqlen, 2048 / head_dim heads,
bf16. Set FLASHATTN_DISABLE_SM90=1 to profile the sm80 kernels on Hopper.

  ncu --kernel-name regex:bwd --section ... python3 bench/gpu/ncu_bwd_pair.py [--hdim 128]
      [--seqlen 4096] [--causal 0]
"""
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashattn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hdim", type=int, default=128)
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--causal", type=int, default=0)
    a = ap.parse_args()
    n, d = a.seqlen, a.hdim
    b, h = 16384 // n, 2048 // d
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    do = torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16)
    o = flashattn.flash_attn_func(q, k, v, causal=bool(a.causal))
    o.backward(do)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        qt, kt, vt = (x.detach().transpose(1, 2).requires_grad_() for x in (q, k, v))
        ot = F.scaled_dot_product_attention(qt, kt, vt, is_causal=bool(a.causal))
        ot.backward(do.transpose(1, 2))
    torch.cuda.synchronize()
    print(f"hdim {d} seqlen {n} batch {b} heads {h} causal {a.causal}: one backward each")


if __name__ == "__main__":
    main()
