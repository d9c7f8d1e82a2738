"""Chunked prefill on a KV cache: flashattn.flash_attn_with_kvcache with a
chunk of query tokens per sequence against the cache (causal, bottom-right:
chunk row i sees the cache and chunk rows 0..i), and torch SDPA on the same
problem, same process.

Grid: batch 1 / 4, cached context 4k / 16k (the chunk's own keys are already
in the cache: cache_seqlens = context + chunk), chunk 16 ... 2048 tokens,
32 query heads over 8 KV heads (--heads), head dim 128 (--head-dim), bf16. TFLOP/s from
the causal work: 4 * batch * heads * d * sum_i (context + i + 1).

--page-size P (a multiple of 16; 0 = contiguous) stores flashattn's cache as
P-row pages in a shuffled pool with a block table (vLLM's layout); SDPA reads
the same keys from the contiguous copy. --api func times the same problem
through flash_attn_func on the cache's first context + chunk rows (a padded
call: no cache_seqlens).

Which flashattn path runs is set per process by the environment (read once):
FLASHATTN_DISABLE_SM90=1 forces the sm80 kernels; FLASHATTN_SM90_KVCACHE_MIN_Q=1
sends every chunk to the Hopper forward (dispatch.cpp). --label names the rows.
SDPA: FlashAttention-2 through torch's causal_lower_right bias (K/V heads
repeated to the query heads outside the timing), and cuDNN where torch takes
the same call.

  FLASHATTN_LIBRARY=.../libflashattn.so PYTHONPATH=python python3 bench/gpu/bench_kvcache_prefill.py out.csv \\
      --label flashattn [--impls flashattn,sdpa_flash,sdpa_cudnn] [--chunks 16,64,512] [--page-size 16]

CSV: impl,batch,context,chunk,hq,hkv,d,ms,kernel_ms,tflops_kernel,kernels (+ header lines).
Times: median of 20 single calls (CUDA events) and the device span of one call
(torch.profiler, median of 20).
"""
import argparse
import datetime
import math
import os
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right

import flashattn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import kernel_time, median_ms  # noqa: E402  (bench/gpu/timing.py)

HQ, HKV = 32, 8


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="?", help="write the rows here too")
    ap.add_argument("--label", default="flashattn", help="impl name of the flashattn rows")
    ap.add_argument("--impls", default="flashattn,sdpa_flash,sdpa_cudnn")
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--batches", default="1,4")
    ap.add_argument("--contexts", default="4096,16384")
    ap.add_argument("--chunks", default="16,32,64,128,256,512,2048")
    ap.add_argument("--heads", default="32,8", help="query heads,KV heads")
    ap.add_argument("--page-size", type=int, default=0, help="paged cache for flashattn (0: contiguous)")
    ap.add_argument("--api", choices=("kvcache", "func"), default="kvcache",
                    help="flashattn entry point: flash_attn_with_kvcache, or flash_attn_func on the keys")
    args = ap.parse_args()
    impls = args.impls.split(",")
    D = args.head_dim
    global HQ, HKV
    HQ, HKV = map(int, args.heads.split(","))
    dev = torch.cuda.get_device_name()
    drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    env = " ".join(f"{k}={os.environ[k]}" for k in ("FLASHATTN_DISABLE_SM90", "FLASHATTN_SM90_KVCACHE_MIN_Q")
                   if k in os.environ)
    lines = [f"# device={dev} driver={drv} date={datetime.datetime.now(datetime.timezone.utc).isoformat()} "
             f"commit={os.environ.get('FLASHATTN_COMMIT', 'unknown')} torch={torch.__version__} "
             f"flashattn={flashattn.library_version()} env: {env or '(none)'}",
             f"# flashattn cache: {f'paged, {args.page_size}-row pages, shuffled' if args.page_size else 'contiguous'}"
             f", api {args.api}",
             "impl,batch,context,chunk,hq,hkv,d,ms,kernel_ms,tflops_kernel,kernels"]
    print("\n".join(lines), flush=True)
    gen = torch.Generator(device="cuda").manual_seed(0)
    for batch in map(int, args.batches.split(",")):
        for ctx in map(int, args.contexts.split(",")):
            for chunk in map(int, args.chunks.split(",")):
                keys = ctx + chunk
                page = args.page_size
                align = math.lcm(256, page) if page else 256
                cap = (keys + align - 1) // align * align
                kc = torch.randn(batch, cap, HKV, D, device="cuda", dtype=torch.bfloat16, generator=gen)
                vc = torch.randn(batch, cap, HKV, D, device="cuda", dtype=torch.bfloat16, generator=gen)
                q = torch.randn(batch, chunk, HQ, D, device="cuda", dtype=torch.bfloat16, generator=gen)
                lens = torch.full((batch,), keys, dtype=torch.int32, device="cuda")
                work = 4.0 * batch * HQ * D * (chunk * ctx + chunk * (chunk + 1) / 2)

                if args.api == "func":
                    kk, vv = kc[:, :keys], vc[:, :keys]

                    def fa():
                        return flashattn.flash_attn_func(q, kk, vv, causal=True)
                elif page:
                    # Page i of sequence b is pool page perm[b * max_pages + i].
                    max_pages = cap // page
                    perm = torch.randperm(batch * max_pages, device="cuda", generator=gen)
                    table = perm.view(batch, max_pages).to(torch.int32)
                    kpool = torch.empty(batch * max_pages, page, HKV, D, device="cuda", dtype=torch.bfloat16)
                    vpool = torch.empty_like(kpool)
                    kpool[perm] = kc.view(batch * max_pages, page, HKV, D)
                    vpool[perm] = vc.view(batch * max_pages, page, HKV, D)

                    def fa():
                        return flashattn.flash_attn_with_kvcache(q, kpool, vpool, cache_seqlens=lens, causal=True,
                                                                 block_table=table)
                else:
                    def fa():
                        return flashattn.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, causal=True)

                qt = q.transpose(1, 2)
                kt = kc[:, :keys].repeat_interleave(HQ // HKV, dim=2).transpose(1, 2)
                vt = vc[:, :keys].repeat_interleave(HQ // HKV, dim=2).transpose(1, 2)
                bias = causal_lower_right(chunk, keys)

                def sdpa(backend):
                    def f():
                        with sdpa_kernel(backend):
                            return F.scaled_dot_product_attention(qt, kt, vt, attn_mask=bias)
                    return f

                ref = None
                for impl, f, only in ((args.label, fa, "flashattn::"),
                                      ("sdpa_flash", sdpa(SDPBackend.FLASH_ATTENTION), None),
                                      ("sdpa_cudnn", sdpa(SDPBackend.CUDNN_ATTENTION), None)):
                    if (impl if impl != args.label else "flashattn") not in impls:
                        continue
                    try:
                        out = f()
                        out = out.transpose(1, 2) if impl != args.label else out
                        if ref is None:
                            ref = out.float()
                        err = (out.float() - ref).abs().max().item()
                        ms = median_ms(f)
                        names, kms = kernel_time(f, only=only, span=True)
                    except RuntimeError as e:  # a backend that refuses the call
                        msg = f"# {impl} batch={batch} context={ctx} chunk={chunk}: {str(e).splitlines()[0]}"
                        print(msg, flush=True)
                        lines.append(msg)
                        continue
                    tf = work / (kms * 1e-3) / 1e12 if kms else float("nan")
                    line = (f"{impl},{batch},{ctx},{chunk},{HQ},{HKV},{D},{ms:.4f},"
                            f"{kms if kms else float('nan'):.4f},{tf:.1f},{names.replace(',', ';')}")
                    print(line + f"   (max|diff| to the first row's output {err:.3g})", flush=True)
                    lines.append(line)
                del kc, vc, q, kt, vt
                if page:
                    del kpool, vpool, table
                torch.cuda.empty_cache()
    if args.csv:
        with open(args.csv, "w") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
