#!/usr/bin/env python3
"""Host overhead of one backward call through torch autograd, beside the op
called directly and cuDNN's (the numbers behind
bench/results/h200-bwd-host-overhead-20261129.txt).

  FLASHATTN_LIBRARY=... PYTHONPATH=python python3 bench/gpu/bench_bwd_overhead.py

Per shape (bf16, 16k tokens, 2048 hidden): "grad event", the CUDA-event median
of torch.autograd.grad as bench_peers times it; "back-to-back", 20 calls queued
(event time / 20: the device time when host and device overlap); "host", the
wall time of one call's host part; then the same for _bwd_impl (no autograd)
and for SDPA's cuDNN backend; the causal forward likewise. At d128/512 also
torch.profiler tables of five grad calls and five forward calls (where the
host time goes).
"""
import sys, time, os, torch
sys.path.insert(0, "bench/gpu")
from timing import median_ms, cuda_time_ms
import flashattn
from flashattn import _torch_ops as T
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
for d, n in ((128, 512), (64, 512), (128, 2048)):
    b, h = 16384 // n, 2048 // d
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    o = flashattn.flash_attn_func(q, k, v)
    g = torch.randn_like(o)
    f = lambda: torch.autograd.grad(o, (q, k, v), g, retain_graph=True)
    out, lse = T._fwd_impl(q.detach(), k.detach(), v.detach(), d ** -0.5, False, -1, -1, 0.0, False)
    direct = lambda: T._bwd_impl(g, q.detach(), k.detach(), v.detach(), out, lse, d ** -0.5, False, -1, -1, 0.0, False)
    def host_us(fn, reps=50):
        ts = []
        for _ in range(reps):
            torch.cuda.synchronize(); t0 = time.perf_counter(); fn(); ts.append((time.perf_counter() - t0) * 1e6)
        ts.sort(); return ts[len(ts) // 2]
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        oc = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
    fc = lambda: torch.autograd.grad(oc, (q, k, v), g, retain_graph=True)
    ff = lambda: flashattn.flash_attn_func(q, k, v, causal=True)
    fd = lambda: T._fwd_impl(q.detach(), k.detach(), v.detach(), d ** -0.5, True, -1, -1, 0.0, False)
    def fc_f():
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
    print(f"d{d} s{n} causal fwd: event {median_ms(ff, repeat=30):.3f} ms, back-to-back {cuda_time_ms(ff, iters=20):.3f} ms, host {host_us(ff):.0f} us | "
          f"_fwd_impl event {median_ms(fd, repeat=30):.3f}, host {host_us(fd):.0f} us | cudnn event {median_ms(fc_f, repeat=30):.3f}, host {host_us(fc_f):.0f} us", flush=True)
    print(f"d{d} s{n}: grad event {median_ms(f, repeat=30):.3f} ms, back-to-back {cuda_time_ms(f, iters=20):.3f} ms, host {host_us(f):.0f} us | "
          f"_bwd_impl event {median_ms(direct, repeat=30):.3f}, host {host_us(direct):.0f} us | cudnn grad event {median_ms(fc, repeat=30):.3f}, host {host_us(fc):.0f} us", flush=True)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(5): f()
        torch.cuda.synchronize()
    if d == 128 and n == 512:
        print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=14, max_name_column_width=60))
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(5): ff()
            torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=12, max_name_column_width=60))
    del q, k, v, o, g, out, lse, oc
