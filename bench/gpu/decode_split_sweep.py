# Usage (device): FLASHATTN_LIBRARY=.../libflashattn.so PYTHONPATH=python python3 bench/gpu/decode_split_sweep.py
# Decode split-count sweep (issue 8): batch 1, contexts 8k and 32k, GQA 64:8, d128, bf16.
# Device span per call (kernel_time span=True) against the copy bandwidth, per num_splits.
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flashattn  # noqa: E402
from timing import kernel_time, median_ms  # noqa: E402
HQ, HKV, D = 64, 8, 128
n = 2 << 30
src = torch.empty(n, dtype=torch.uint8, device="cuda"); dst = torch.empty_like(src)
copy = 2 * n / (median_ms(lambda: dst.copy_(src)) * 1e-3) / 1e9
print(f"# copy_gbps={copy:.0f}", flush=True)
del src, dst
print("context,num_splits,kernel_us,frac_copy", flush=True)
for ctx in (8192, 32768):
    kvb = 2 * ctx * HKV * D * 2
    copies = max(1, -(-(512 << 20) // kvb))
    caches = [(torch.randn(1, ctx, HKV, D, device="cuda", dtype=torch.bfloat16),
               torch.randn(1, ctx, HKV, D, device="cuda", dtype=torch.bfloat16)) for _ in range(copies)]
    q = torch.randn(1, 1, HQ, D, device="cuda", dtype=torch.bfloat16)
    lens = torch.full((1,), ctx, dtype=torch.int32, device="cuda")
    for rnd in (1, 2):
        for ns in (0, 24, 32, 48, 66, 96, 128):
            st = {"i": 0}
            def f():
                kc, vc = caches[st["i"] % copies]; st["i"] += 1
                flashattn.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, num_splits=ns)
            _, kms = kernel_time(f, only="flashattn::", span=True)
            print(f"{ctx},{ns},{kms*1e3:.1f},{kvb / (kms * 1e-3) / 1e9 / copy:.3f}", flush=True)
