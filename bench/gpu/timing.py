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
kernel_time: the CUDA kernels one call launches and their device time per
             call (torch.profiler), without the host time the others hold.
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


def kernel_time(fn, reps: int = 20, only: str | None = "flashattn::", span: bool = False,
                per_kernel: bool = False):
    """(names, ms): the CUDA kernels one call of fn launches whose name holds
    `only` (None: every kernel), and their device time per call
    (torch.profiler, `reps` calls), without the host time a call's CUDA-event
    timing also holds (which matters for calls under ~0.3 ms). By default the
    sum over kernels of each kernel's median interval times its launches per
    call (the median keeps a slow first interval, the profiler starting up,
    out). span=True: the median over calls of the span from the call's first
    kernel start to its last kernel end, gaps included -- right when kernels
    of one call overlap (programmatic dependent launch starts the next grid
    before the last one ends, and a sum would count the overlap twice), but
    it also counts any gap in which the GPU waits for the host. ms is None
    when the profiler gives no intervals. per_kernel=True: instead a dict of
    each kernel's ms per call (its short name -> median interval x launches)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(reps):
                fn()
            torch.cuda.synchronize()
        per = {}  # short name -> intervals (us), in first-launch order
        spans = []  # (start, end) us of every matching kernel
        for e in prof.events():
            if getattr(e, "device_type", None) is not None and "CUDA" in str(e.device_type):
                n = e.name
                if only is not None and only not in n:
                    continue  # e.g. torch's own kernels (autograd fills, copies)
                n = n.replace("flashattn::detail::cuda::", "").replace("(anonymous namespace)::", "")
                n = n.split("(")[0].replace("void ", "")
                per.setdefault(n, []).append(e.time_range.elapsed_us())
                spans.append((e.time_range.start, e.time_range.end))
        names = " + ".join(per) if per else "?"
        if per_kernel:  # {name: ms per call}, each kernel's median interval x its launches per call
            return {n: sorted(ts)[len(ts) // 2] * len(ts) / reps / 1e3 for n, ts in per.items()}
        if span:
            k = len(spans) // reps
            if k == 0 or len(spans) % reps:
                return names, None
            spans.sort()
            calls = sorted(max(e for _, e in spans[i:i + k]) - spans[i][0] for i in range(0, len(spans), k))
            return names, calls[len(calls) // 2] / 1e3
        total_us = 0.0
        for ts in per.values():
            ts = sorted(ts)
            total_us += ts[len(ts) // 2] * len(ts) / reps
        return names, (total_us / 1e3 if total_us > 0 else None)
    except Exception as e:  # profiler unavailable: say so
        return f"? ({type(e).__name__})", None
