"""FP8 (e4m3) forward against flashattn's bf16 forward and torch SDPA's cuDNN
(bf16), same process, same shapes (DESIGN.md's grid at head dims 128 and
256), plus the fp8 error against the bf16 error on the same data.

Timing: CUDA events, 5 warm-up calls, median of 30. The fp8 time includes
the V transpose (fp8_v_transpose.cu) that every fp8 call runs (--kernels
prints each kernel's device time apart). flashattn_fp8_varlen (not in the
default --impls): the same tokens as a varlen batch of equal sequences
(cu_seqlens), against the padded call. FLOPs are the
attention's (4 B H S^2 d, halved for causal). Prints CSV (and writes it to
the path given as the first argument):

  impl,pass,hdim,seqlen,causal,batch,heads,ms,tflops

then, as comment lines, the error report: fp32 N(0, 1) inputs, quantised
per tensor to e4m3 (descale = amax / 448) and rounded to bf16; both outputs
against the float64 attention of the fp32 inputs (max and RMS of |out - ref|).

Run on the H200 with the CUDA build's library:
  FLASHATTN_LIBRARY=build/libflashattn.so PYTHONPATH=python python3 bench/gpu/bench_fp8.py out.csv
"""
import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashattn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_peers import Tee, flops, header  # noqa: E402
from timing import kernel_time, median_ms  # noqa: E402


def quantise(x):
    """(e4m3 tensor, descale) with descale = amax / 448 (per tensor)."""
    descale = x.abs().max().float() / 448.0
    return (x / descale).to(torch.float8_e4m3fn), descale.reshape(1)


def error_report(out, d, seqlen, heads, causal):
    g = torch.Generator(device="cuda").manual_seed(d * 131 + seqlen + int(causal))
    q, k, v = (torch.randn(1, seqlen, heads, d, device="cuda", generator=g) for _ in range(3))
    s = torch.einsum("bqhd,bkhd->bhqk", q.double(), k.double()) / math.sqrt(d)
    if causal:
        s.masked_fill_(torch.ones(seqlen, seqlen, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
    ref = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, -1), v.double())
    del s
    o16 = flashattn.attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), causal=bool(causal))
    (q8, sq), (k8, sk), (v8, sv) = quantise(q), quantise(k), quantise(v)
    o8 = flashattn.attention_fp8(q8, k8, v8, q_descale=sq, k_descale=sk, v_descale=sv, causal=bool(causal))
    for name, o in (("bf16", o16), ("fp8", o8)):
        e = (o.double() - ref).abs()
        print(f"# error,{name},hdim={d},seqlen={seqlen},causal={causal},max_abs={e.max().item():.4g},"
              f"rms={e.pow(2).mean().sqrt().item():.4g},max_ref={ref.abs().max().item():.4g}",
              file=out, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv", nargs="?")
    ap.add_argument("--hdims", default="128,256")
    ap.add_argument("--seqlens", default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--impls", default="flashattn_bf16,flashattn_fp8,sdpa_cudnn_bf16")
    ap.add_argument("--error-seqlen", type=int, default=4096, help="0: no error report")
    ap.add_argument("--kernels", action="store_true",
                    help="also print each fp8 call's kernels and their device time (torch.profiler): "
                         "the V transpose apart from the attention")
    a = ap.parse_args()
    ints = lambda s: [int(x) for x in s.split(",") if x]
    out = Tee(a.csv)
    header(out)
    print("impl,pass,hdim,seqlen,causal,batch,heads,ms,tflops", file=out, flush=True)
    torch.manual_seed(0)
    for d in ints(a.hdims):
        for n in ints(a.seqlens):
            b, h = 16384 // n, 2048 // d
            q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            (q8, sq), (k8, sk), (v8, sv) = quantise(q), quantise(k), quantise(v)
            for causal in ints(a.causal):
                def sdpa_cudnn():
                    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                        return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                              v.transpose(1, 2), is_causal=bool(causal))
                # The same tokens as a varlen batch of b equal sequences (packed views).
                cu = torch.arange(0, (b + 1) * n, n, dtype=torch.int32, device="cuda")
                impls = {
                    "flashattn_bf16": lambda: flashattn.attention(q, k, v, causal=bool(causal)),
                    "flashattn_fp8": lambda: flashattn.attention_fp8(
                        q8, k8, v8, q_descale=sq, k_descale=sk, v_descale=sv, causal=bool(causal)),
                    "flashattn_fp8_varlen": lambda: flashattn.attention_fp8(
                        q8.view(b * n, h, d), k8.view(b * n, h, d), v8.view(b * n, h, d), q_descale=sq,
                        k_descale=sk, v_descale=sv, causal=bool(causal), cu_seqlens_q=cu, cu_seqlens_k=cu,
                        max_seqlen_q=n, max_seqlen_k=n),
                    "sdpa_cudnn_bf16": sdpa_cudnn,
                }
                for name in a.impls.split(","):
                    f = impls[name]
                    try:
                        ms = median_ms(f, repeat=30)
                        tf = flops(b, h, n, d, causal, "fwd") / ms / 1e9
                        print(f"{name},fwd,{d},{n},{causal},{b},{h},{ms:.4f},{tf:.1f}", file=out, flush=True)
                        if a.kernels and name.startswith("flashattn_fp8"):
                            per = kernel_time(f, per_kernel=True)
                            parts = ";".join(f"{k}={v * 1e3:.1f}us" for k, v in per.items()) \
                                if isinstance(per, dict) else str(per)
                            print(f"# kernels,{name},hdim={d},seqlen={n},causal={causal},{parts}", file=out,
                                  flush=True)
                    except Exception as e:  # record, go on
                        print(f"{name},fwd,{d},{n},{causal},{b},{h},nan,nan  # {type(e).__name__}: "
                              f"{str(e)[:100]}", file=out, flush=True)
            del q, k, v, q8, k8, v8
            torch.cuda.empty_cache()
    for d in ints(a.hdims):
        for causal in ints(a.causal):
            if a.error_seqlen > 0:
                error_report(out, d, a.error_seqlen, 8, causal)


if __name__ == "__main__":
    main()
