"""Head dims the kernels do not take as they are, on the GPU: v with a head dim
of its own (DeepSeek-V3's prefill: q / k 192, v 128; --dims 192:128, the
default) and head dims that are not multiples of 8 (--dims 100:100).

In one process, on the same tensors, bf16, 16k tokens per batch, 16 heads:
  flashattn_D_Dv     flashattn on the D / Dv tensors (where the kernels need
                     it, zero-padded copies to P = max(D, Dv) rounded up to 8
                     around the P kernels: src/common/head_dim_pad.hpp; the
                     Hopper path takes 192 / 128 as it is)
  flashattn_P_P      flashattn on tensors of head dim P on both sides: the
                     kernels alone, the cost without the copies
  sdpa_cudnn / sdpa_efficient / sdpa_flash  torch SDPA's backends on the
                     D / Dv tensors (a backend that refuses the shape is
                     recorded as nan with its reason)
TFLOP/s count the useful work: 2 * pairs * (D + Dv) for the forward and
2.5x that for the backward pass (bench_peers.py's count), whatever the
kernels do; the P / P rows count their own. CSV columns:

  impl,pass,d,dv,seqlen,causal,batch,heads,ms,tflops

  FLASHATTN_LIBRARY=... PYTHONPATH=python python3 bench/gpu/bench_head_dim_v.py out.csv
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashattn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_peers import Tee, header  # noqa: E402
from timing import median_ms  # noqa: E402


def flops(b, h, n, d, dv, causal, mode):
    f = 2 * b * h * n * n * (d + dv) / (2 if causal else 1)
    return f * (2.5 if mode == "bwd" else 1.0)


def set_pool_release_threshold(mb):
    """The CUDA default memory pool of device 0 keeps `mb` MiB after a
    synchronisation instead of returning it to the driver (the library raises
    it to 256 MiB only when the caller left it at 0). Through the driver API,
    so that torch's and the library's runtimes see the same pool."""
    import ctypes

    cu = ctypes.CDLL("libcuda.so.1")
    dev, pool = ctypes.c_int(), ctypes.c_void_p()
    assert cu.cuInit(0) == 0 and cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cu.cuDeviceGetDefaultMemPool(ctypes.byref(pool), dev) == 0
    val = ctypes.c_uint64(mb << 20)
    assert cu.cuMemPoolSetAttribute(pool, 4, ctypes.byref(val)) == 0  # CU_MEMPOOL_ATTR_RELEASE_THRESHOLD


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pool-threshold-mb", type=int, default=0,
                    help="set the default pool's release threshold first (0: leave it to the library)")
    ap.add_argument("csv", nargs="?")
    ap.add_argument("--seqlens", default="1024,4096,16384")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--dims", default="192:128", help="d:dv pairs, comma separated")
    ap.add_argument("--passes", default="fwd,bwd")
    a = ap.parse_args()
    if a.pool_threshold_mb:
        set_pool_release_threshold(a.pool_threshold_mb)
    out = Tee(a.csv)
    header(out)
    print("impl,pass,d,dv,seqlen,causal,batch,heads,ms,tflops", file=out, flush=True)
    torch.manual_seed(0)
    backends = {"sdpa_cudnn": SDPBackend.CUDNN_ATTENTION, "sdpa_efficient": SDPBackend.EFFICIENT_ATTENTION,
                "sdpa_flash": SDPBackend.FLASH_ATTENTION}
    h = a.heads
    for pair in a.dims.split(","):
        d, dv = (int(x) for x in pair.split(":"))
        for n in (int(x) for x in a.seqlens.split(",")):
            b = 16384 // n
            mk = lambda dd: torch.randn(b, n, h, dd, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            q, k, v = mk(d), mk(d), mk(dv)
            P = (max(d, dv) + 7) // 8 * 8
            # The same call at the kernels' width on both sides: their own time.
            wide = (q, k, mk(P)) if P == d else (mk(P), mk(P), mk(P))
            for causal in (0, 1):
                impls = {f"flashattn_{d}_{dv}": (lambda c: flashattn.flash_attn_func(q, k, v, causal=bool(c)), (q, k, v)),
                         f"flashattn_{P}_{P}": (lambda c: flashattn.flash_attn_func(*wide, causal=bool(c)), wide)}
                for name, be in backends.items():
                    def fn(c, be=be):
                        with sdpa_kernel([be]):
                            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                               v.transpose(1, 2), is_causal=bool(c))
                        return o.transpose(1, 2)
                    impls[name] = (fn, (q, k, v))
                for name, (fn, leaves) in impls.items():
                    dq_, dvv = leaves[0].shape[3], leaves[2].shape[3]
                    for mode in a.passes.split(","):
                        try:
                            if mode == "fwd":
                                f = lambda: fn(causal)
                            else:
                                o = fn(causal)
                                g = torch.randn_like(o)
                                f = lambda: torch.autograd.grad(o, leaves, g, retain_graph=True)
                            ms = median_ms(f, repeat=20)
                            tf = flops(b, h, n, dq_, dvv, causal, mode) / ms / 1e9
                            print(f"{name},{mode},{dq_},{dvv},{n},{causal},{b},{h},{ms:.4f},{tf:.1f}", file=out, flush=True)
                        except Exception as e:  # a peer without this shape: record, go on
                            msg = str(e).replace("\n", " ")[:100]
                            print(f"{name},{mode},{dq_},{dvv},{n},{causal},{b},{h},nan,nan  # {type(e).__name__}: {msg}",
                                  file=out, flush=True)
            del q, k, v, wide
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
