"""Where the time of a short attention call goes: flashattn against SDPA's
cuDNN backend on the short end of DESIGN.md's grid (bf16, 16k tokens,
hidden 2048), forward or backward. Per shape and implementation:

  event_ms   CUDA-event median of one call (what bench_peers reports; holds
             any host time before the first kernel starts)
  stream_ms  20 calls queued back to back, event time / 20 (host and device
             overlap)
  kernel_ms  device time of the call's kernels (torch.profiler, span from
             the first kernel's start to the last one's end)
  host_us    host time of one call: wall time from its start to its return,
             the GPU idle before it (median of 30)

  FLASHATTN_LIBRARY=... PYTHONPATH=python python3 bench/gpu/bench_short_calls.py [out.csv]
      [--pass fwd|bwd] [--hdims 64,128,256] [--seqlens 512,1024,2048] [--causal 1]
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_peers import Tee, flashattn_and_cudnn, flops, grid_qkv, header  # noqa: E402
from timing import cuda_time_ms, kernel_time, median_ms  # noqa: E402


def host_us(f, reps=30):
    ts = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        f()
        ts.append((time.perf_counter() - t0) * 1e6)
    ts.sort()
    return ts[len(ts) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv", nargs="?")
    ap.add_argument("--pass", dest="mode", default="fwd", choices=("fwd", "bwd"))
    ap.add_argument("--hdims", default="64,128,256")
    ap.add_argument("--seqlens", default="512,1024,2048")
    ap.add_argument("--causal", default="1")
    a = ap.parse_args()
    ints = lambda s: [int(x) for x in s.split(",") if x]
    out = Tee(a.csv)
    header(out)
    print("impl,pass,hdim,seqlen,causal,event_ms,stream_ms,kernel_ms,host_us,tflops_event,tflops_kernel",
          file=out, flush=True)
    for d, n, b, h, q, k, v in grid_qkv(ints(a.hdims), ints(a.seqlens)):
        for c in ints(a.causal):
            for name, fn in flashattn_and_cudnn(q, k, v, c):
                if a.mode == "fwd":
                    f = fn
                else:
                    o = fn()
                    g = torch.randn_like(o)
                    f = lambda o=o, g=g: torch.autograd.grad(o, (q, k, v), g, retain_graph=True)
                ev = median_ms(f, repeat=30)
                st = cuda_time_ms(f, iters=20)
                _, km = kernel_time(f, only=None, span=True)
                hu = host_us(f)
                fl = flops(b, h, n, d, c, a.mode)
                tk = f"{fl / km / 1e9:.1f}" if km else "nan"
                print(f"{name},{a.mode},{d},{n},{c},{ev:.4f},{st:.4f},{km if km else float('nan'):.4f},"
                      f"{hu:.1f},{fl / ev / 1e9:.1f},{tk}", file=out, flush=True)


if __name__ == "__main__":
    main()
