#!/usr/bin/env python3
"""Per-call cost of flash_attn_with_kvcache (issue 8: decode at batch 1 is host-bound).

  python3 bench/gpu/bench_call_overhead.py [OUT.csv] [--device cpu|cuda|both] [--iters N]

cpu:  tiny CPU tensors (batch 1, 1 query token, 8 query heads on 1 KV head,
      head dim 64, 16 cached tokens), so the attention itself is ~1 us and the
      time per call is the Python argument building + the C ABI call + the
      library's checks. Also times the Python front end alone (the C call
      replaced by a no-op) to split the two.
cuda: batch 1 decode, GQA 8:1 (64 query heads on 8 KV heads), head dim 128, bf16, context
      1k and 8k: (a) eager calls back to back, wall time per call over N calls
      (the host floor when it exceeds the kernel time), and CUDA-event time;
      (b) the same call captured once in a CUDA graph and replayed, when
      capture works (reported either way); (c) torch SDPA on the same shapes.

Medians of repeated timing blocks (bench/gpu/timing.py).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import cuda_time_ms, wall_time_us  # noqa: E402

from flashattn import flash_attn_with_kvcache  # noqa: E402
from flashattn import _capi  # noqa: E402


def _rows_cpu(iters: int) -> list:
    torch.manual_seed(0)
    B, Hq, Hkv, D, S = 1, 8, 1, 64, 16
    q = torch.randn(B, 1, Hq, D)
    kc = torch.randn(B, S + 16, Hkv, D)
    vc = torch.randn(B, S + 16, Hkv, D)
    lens = torch.full((B,), S, dtype=torch.int32)
    kn = torch.randn(B, 1, Hkv, D)
    vn = torch.randn(B, 1, Hkv, D)
    rows = []

    def call():
        flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, causal=True)

    def call_append():
        flash_attn_with_kvcache(q, kc, vc, kn, vn, cache_seqlens=lens, causal=True)

    def call_int_lens():
        flash_attn_with_kvcache(q, kc, vc, cache_seqlens=S, causal=True)

    for name, fn in (("kvcache", call), ("kvcache_append", call_append), ("kvcache_int_seqlens", call_int_lens)):
        rows.append(dict(device="cpu", case=name, context=S, us_per_call=wall_time_us(fn, iters)))
    # The Python front end alone: the foreign call replaced by a no-op.
    fn = "forward_kvcache_packed" if hasattr(_capi, "forward_kvcache_packed") else "forward_kvcache"
    saved = getattr(_capi, fn)
    setattr(_capi, fn, lambda *values: None)
    try:
        rows.append(dict(device="cpu", case="kvcache_python_only", context=S,
                         us_per_call=wall_time_us(call, iters)))
    finally:
        setattr(_capi, fn, saved)
    return rows


def _rows_cuda(iters: int) -> list:
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    rows = []
    dev = torch.device("cuda")
    B, Hq, Hkv, D = 1, 64, 8, 128  # bench_decode.py's shapes
    for ctx in (1024, 8192):
        q = torch.randn(B, 1, Hq, D, device=dev, dtype=torch.bfloat16)
        kc = torch.randn(B, ctx, Hkv, D, device=dev, dtype=torch.bfloat16)
        vc = torch.randn(B, ctx, Hkv, D, device=dev, dtype=torch.bfloat16)
        lens = torch.full((B,), ctx, dtype=torch.int32, device=dev)
        kv_bytes = 2 * B * ctx * Hkv * D * 2

        def call():
            flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens)

        for _ in range(10):
            call()
        torch.cuda.synchronize()
        wall = wall_time_us(call, iters, sync=torch.cuda.synchronize)
        ev = cuda_time_ms(call, iters=iters) * 1e3
        rows.append(dict(device="cuda", case="kvcache_eager", context=ctx, us_per_call=wall, event_us=ev,
                         gbps=kv_bytes / (max(wall, ev) * 1e-6) / 1e9))

        # CUDA graph capture of the same call (the output buffer is the graph's).
        graph_note, graph_us = "", float("nan")
        try:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    call()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                out_g = flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens)
            g.replay()
            torch.cuda.synchronize()
            ref = flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens)
            ok = torch.equal(out_g, ref)
            graph_us = cuda_time_ms(g.replay, iters=iters) * 1e3
            graph_note = "captured" + ("" if ok else " (replay output differs!)")
        except Exception as e:  # capture unsupported: say why
            graph_note = f"capture failed: {type(e).__name__}: {str(e)[:120]}"
        rows.append(dict(device="cuda", case="kvcache_graph_replay", context=ctx, us_per_call=graph_us,
                         event_us=graph_us, gbps=kv_bytes / (graph_us * 1e-6) / 1e9 if graph_us == graph_us else "",
                         note=graph_note))

        # torch SDPA on the same decode step (K/V expanded to 32 heads beforehand, not timed).
        qt = q.transpose(1, 2)
        kt = kc.transpose(1, 2).repeat_interleave(Hq // Hkv, dim=1)
        vt = vc.transpose(1, 2).repeat_interleave(Hq // Hkv, dim=1)

        def sd():
            sdpa(qt, kt, vt)

        for _ in range(10):
            sd()
        wall = wall_time_us(sd, iters, sync=torch.cuda.synchronize)
        ev = cuda_time_ms(sd, iters=iters) * 1e3
        rows.append(dict(device="cuda", case="torch_sdpa", context=ctx, us_per_call=wall, event_us=ev,
                         gbps=kv_bytes * (Hq // Hkv) / (max(wall, ev) * 1e-6) / 1e9,
                         note="K/V repeated to 64 heads: reads 8x the bytes"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default="")
    ap.add_argument("--device", default="both", choices=["cpu", "cuda", "both"])
    ap.add_argument("--iters", type=int, default=2000)
    a = ap.parse_args()
    rows = []
    if a.device in ("cpu", "both"):
        rows += _rows_cpu(a.iters)
    if a.device in ("cuda", "both") and torch.cuda.is_available():
        rows += _rows_cuda(max(a.iters // 4, 50))
    elif a.device == "cuda":
        raise SystemExit("no CUDA device")
    fields = ["device", "case", "context", "us_per_call", "event_us", "gbps", "note"]
    print(" ".join(f"{f:>22}" if i else f"{f:>6}" for i, f in enumerate(fields[:6])), " note")
    for r in rows:
        vals = [r.get(f, "") for f in fields]
        print(" ".join((f"{v:>22.2f}" if isinstance(v, float) else f"{v!s:>22}") if i else f"{v!s:>6}"
                       for i, v in enumerate(vals[:6])), "", vals[6])
    if a.out:
        with open(a.out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields)
            w.writeheader()
            for r in rows:
                w.writerow({k: r.get(k, "") for k in fields})
        print("wrote", a.out)


if __name__ == "__main__":
    main()
