"""Which kernels each implementation runs on DESIGN.md's grid, and how long each takes: the
CUDA kernels of one call of flashattn and of torch SDPA's cuDNN backend (bf16, 16k tokens,
hidden 2048; forward, or forward + backward through autograd), per kernel its name, launches
per call and median device time (torch.profiler, 10 calls). cuDNN's generated kernel names
carry their tile shape (e.g. `..._knob_7_64x128x64_4x1x1_...`: query rows x keys x head dim),
so the census shows which tile a peer picks where it beats us.

  FLASHATTN_LIBRARY=... PYTHONPATH=python python3 bench/gpu/kernel_census.py out.csv
      [--hdims 64,128,256] [--seqlens 512,...,16384] [--causal 0,1] [--passes fwd,bwd]

CSV: impl,pass,hdim,seqlen,causal,kernel,launches,median_us
"""
import argparse
import os
import re
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_peers import Tee, flashattn_and_cudnn, grid_qkv, header  # noqa: E402

REPS = 10


def short_name(name: str) -> str:
    """The kernel's name without namespaces, template arguments' noise or parameters."""
    n = name.replace("void ", "").replace("flashattn::detail::cuda::", "")
    n = n.split("(")[0]
    n = re.sub(r"\s+", " ", n)
    return n.replace(",", ";")[:160]


def census(fn):
    """[(kernel, launches per call, median us)] of fn's CUDA kernels, first-launch order."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(REPS):
            fn()
        torch.cuda.synchronize()
    per = {}
    for e in prof.events():
        if getattr(e, "device_type", None) is not None and "CUDA" in str(e.device_type):
            per.setdefault(short_name(e.name), []).append(e.time_range.elapsed_us())
    out = []
    for n, ts in per.items():
        ts.sort()
        out.append((n, len(ts) / REPS, ts[len(ts) // 2]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="?")
    ap.add_argument("--hdims", default="64,128,256")
    ap.add_argument("--seqlens", default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--passes", default="fwd,bwd")
    a = ap.parse_args()
    ints = lambda s: [int(x) for x in s.split(",") if x]
    out = Tee(a.csv)
    header(out)
    print("impl,pass,hdim,seqlen,causal,kernel,launches,median_us", file=out, flush=True)
    for d, n, b, h, q, k, v in grid_qkv(ints(a.hdims), ints(a.seqlens)):
        for c in ints(a.causal):
            for impl, fn in flashattn_and_cudnn(q, k, v, c):
                for mode in a.passes.split(","):
                    try:
                        if mode == "fwd":
                            f = fn
                        else:  # forward + backward: the backward's kernels are the new names
                            g = torch.randn_like(fn())

                            def f(fn=fn, g=g):
                                torch.autograd.backward(fn(), g)
                                q.grad = k.grad = v.grad = None
                        rows = census(f)
                    except Exception as e:  # a peer without this shape: record, go on
                        print(f"{impl},{mode},{d},{n},{c},# {type(e).__name__}: {str(e)[:80]},0,0", file=out,
                              flush=True)
                        continue
                    for name, launches, us in rows:
                        print(f"{impl},{mode},{d},{n},{c},{name},{launches:g},{us:.1f}", file=out, flush=True)


if __name__ == "__main__":
    main()
