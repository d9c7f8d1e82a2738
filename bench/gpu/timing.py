"""Timing helpers shared by the GPU benchmarks (bench_decode, bench_peers,
bench_call_overhead, bench_varlen).

median_ms:   median of `repeat` CUDA-event timings of one call each, after
             `warmup` calls (a call's event time includes any host time the
             GPU spends waiting for the launch: for tiny kernels it is the
             per-call floor).
cuda_time_ms: CUDA-event time of `iters` back-to-back calls / iters (host and
             device overlap: the throughput of a stream of calls).
wall_time_us: host wall-clock time per call over `iters` calls, median of
             `blocks` blocks (sync: called after each block, e.g.
             torch.cuda.synchronize, so queued GPU work is counted).
"""

from __future__ import annotations

import time


def median_ms(f, warmup=5, repeat=20):
    """Median of `repeat` CUDA-event timings after `warmup` calls."""
    import torch

    for _ in range(warmup):
        f()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        f()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return times[len(times) // 2]


def cuda_time_ms(f, iters=100, warmup=5, blocks=5):
    """Median over `blocks` of (event time of `iters` back-to-back calls) / iters."""
    import torch

    for _ in range(warmup):
        f()
    torch.cuda.synchronize()
    per = []
    for _ in range(blocks):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(iters):
            f()
        e.record()
        e.synchronize()
        per.append(s.elapsed_time(e) / iters)
    per.sort()
    return per[len(per) // 2]


def wall_time_us(f, iters=1000, warmup=20, blocks=5, sync=None):
    """Median over `blocks` of host wall time per call (microseconds)."""
    for _ in range(warmup):
        f()
    if sync:
        sync()
    per = []
    for _ in range(blocks):
        t0 = time.perf_counter()
        for _ in range(iters):
            f()
        if sync:
            sync()
        per.append((time.perf_counter() - t0) / iters * 1e6)
    per.sort()
    return per[len(per) // 2]
