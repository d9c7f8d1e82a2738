"""CPU KV-cache decode (issue 3, item 3): flashattn.flash_attn_with_kvcache on
CPU tensors (split-KV over the threads, GQA heads packed so a group shares one
K/V pass) against a streaming-read loop over the same number of bytes, and
torch CPU SDPA, in one run with the same thread count.

Shapes: batch 1, one query token, 32 query heads / 4 KV heads (GQA 8:1),
head dim 128, context 1k ... 64k, fp32 and bf16 (--dtypes adds fp16). Bandwidth = K/V bytes /
time. The read loop is torch.sum over a fresh 1 GiB fp32 tensor (larger than
any cache), its bytes / time. Each timed call reads the next of enough copies
of the caches to fill --rotate-bytes (default 1 GiB), so that, as in a model's
decode step (every other layer's cache passes through between two uses of
one), K and V come from memory and not from a last-level cache that can hold
them (260 MiB of L3 on the tenth session's host); --rotate-bytes 0 times one
copy, cache-warm. The 2-core machine is shared with compiles: each
point is the median of 15 timed calls after 3 warm-up calls, and the spread
(min .. max) is printed beside it.

  FLASHATTN_LIBRARY=.../libflashattn.so PYTHONPATH=python python3 bench/cpu/bench_decode.py [out.csv]
"""
import argparse
import datetime
import itertools
import math
import subprocess
import sys

import torch
import torch.nn.functional as F

import flashattn
from torch_sdpa import timed  # same folder: the median / min / max timer

HQ, HKV, D = 32, 4, 128


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv", nargs="?")
    ap.add_argument("--rotate-bytes", type=float, default=float(1 << 30))
    ap.add_argument("--dtypes", default="fp32,bf16", help="comma-separated, of fp32, bf16, fp16")
    a = ap.parse_args()
    names = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    bad = [d for d in a.dtypes.split(",") if d not in names]
    if bad:
        ap.error(f"unknown --dtypes {bad}: choose from {sorted(names)}")
    dtypes = [names[d] for d in a.dtypes.split(",")]
    out = a.csv
    nt = torch.get_num_threads()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    big = torch.ones(1 << 28, dtype=torch.float32)  # 1 GiB
    r_med, r_min, r_max = timed(lambda: big.sum(), 15, warmup=3)
    read_gbps = big.numel() * 4 / r_med / 1e9
    # commit: the working tree's; lib: the library this process loaded (FLASHATTN_LIBRARY may point
    # at another build, as in the A/B runs of bench/results).
    lines = [f"# cpu decode, threads={nt}, date={datetime.datetime.now(datetime.timezone.utc).isoformat()} commit={commit} "
             f"lib={flashattn.library_path()} torch={torch.__version__}",
             f"# caches rotated over {a.rotate_bytes / 2**20:.0f} MiB per shape (0: one copy, cache-warm)",
             f"# streaming read (torch.sum, 1 GiB fp32): median {read_gbps:.2f} GB/s "
             f"(spread {big.numel() * 4 / r_max / 1e9:.2f} .. {big.numel() * 4 / r_min / 1e9:.2f})",
             "impl,dtype,context,ms_median,ms_min,ms_max,kv_mbytes,gbps,frac_read"]
    print("\n".join(lines), flush=True)
    del big
    g = torch.Generator().manual_seed(0)
    for dtype in dtypes:
        for ctx in (1024, 4096, 16384, 65536):
            kc = torch.randn(1, ctx, HKV, D, generator=g).to(dtype)
            vc = torch.randn(1, ctx, HKV, D, generator=g).to(dtype)
            q = torch.randn(1, 1, HQ, D, generator=g).to(dtype)
            kv_bytes = 2 * kc.numel() * kc.element_size()
            n = max(1, math.ceil(a.rotate_bytes / kv_bytes))
            caches = [(kc, vc)] + [(kc.clone(), vc.clone()) for _ in range(n - 1)]
            nxt = itertools.cycle(range(n))

            def fa():
                k, v = caches[next(nxt)]
                return flashattn.flash_attn_with_kvcache(q, k, v, cache_seqlens=ctx)

            def sdpa():
                k, v = caches[next(nxt)]
                return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                      enable_gqa=True)
            impls = (("flashattn", fa), ("torch_sdpa", sdpa))
            for name, f in impls:
                med, tmin, tmax = timed(f, 15, warmup=3)
                gbps = kv_bytes / med / 1e9
                line = (f"{name},{str(dtype).split('.')[-1]},{ctx},{med * 1e3:.3f},{tmin * 1e3:.3f},"
                        f"{tmax * 1e3:.3f},{kv_bytes / 1e6:.1f},{gbps:.2f},{gbps / read_gbps:.2f}")
                print(line, flush=True)
                lines.append(line)
            del caches, kc, vc
    if out:
        with open(out, "w") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
