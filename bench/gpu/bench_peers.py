"""flashattn against torch SDPA's flash (FA2) and cuDNN backends, same process, same inputs.

DESIGN.md's grid: 16k tokens per batch (batch = 16384 / seqlen), hidden 2048
(heads = 2048 / hdim), seqlen 512 ... 16384, hdim 64/128/256, causal and not,
bf16; forward and backward. CUDA events, 5 warm-up calls,
median of 30. Prints CSV (and writes it to the path given as the first argument):

  impl,pass,hdim,seqlen,causal,batch,heads,ms,tflops

Run on the H200 with the CUDA build's library:
  FLASHATTN_LIBRARY=build/libflashattn.so PYTHONPATH=python python3 bench/gpu/bench_peers.py out.csv
"""
import argparse
import datetime
import os
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
import flashattn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import median_ms  # noqa: E402  (bench/gpu/timing.py)


def flops(b, h, n, d, causal, mode):
    f = 4 * b * h * n * n * d / (2 if causal else 1)
    return f * (2.5 if mode == "bwd" else 1.0)


def header(out):
    p = torch.cuda.get_device_properties(0)
    try:
        drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip()
    except OSError:
        drv = "?"
    # The build's commit, when the caller names it, wins over the checkout's:
    # on the device the checkout's HEAD need not be the commit that was built.
    commit = os.environ.get("FLASHATTN_COMMIT")
    if not commit:
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                    cwd=os.path.dirname(__file__)).stdout.strip() or "?"
        except OSError:
            commit = "?"
    print(f"# device: {p.name}, driver {drv}; date {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%dT%H:%MZ}; "
          f"flashattn commit {commit}; torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}",
          file=out, flush=True)


def grid_qkv(hdims, seqlens, requires_grad=True):
    """DESIGN.md's grid: per head dim d and seqlen n, batch b = 16384 / n and
    h = 2048 / d heads; yields (d, n, b, h, q, k, v) with fresh bf16 tensors
    in BSHD storage, as flash-attn users hold them (SDPA gets the BHSD view)."""
    for d in hdims:
        for n in seqlens:
            b, h = 16384 // n, 2048 // d
            q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=requires_grad)
                       for _ in range(3))
            yield d, n, b, h, q, k, v
            del q, k, v
            torch.cuda.empty_cache()


def flashattn_and_cudnn(q, k, v, causal):
    """[("flashattn", fn), ("sdpa_cudnn", fn)]: one forward call of each on the
    grid's BSHD tensors (SDPA on the BHSD views), returning BSHD outputs."""
    def fa():
        return flashattn.flash_attn_func(q, k, v, causal=bool(causal))

    def cudnn():
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                               is_causal=bool(causal))
        return o.transpose(1, 2)

    return [("flashattn", fa), ("sdpa_cudnn", cudnn)]


class Tee:
    """stdout plus, when a path is given, that CSV file."""

    def __init__(self, path=None):
        self.sinks = [sys.stdout] + ([open(path, "w")] if path else [])

    def write(self, s):
        for f in self.sinks:
            f.write(s)

    def flush(self):
        for f in self.sinks:
            f.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv", nargs="?")
    ap.add_argument("--hdims", default="64,128,256")
    ap.add_argument("--seqlens", default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--passes", default="fwd,bwd")
    ap.add_argument("--impls", default="flashattn,sdpa_flash,sdpa_cudnn",
                    help="comma list of flashattn, flashattn_det (deterministic backward), "
                         "sdpa_flash, sdpa_cudnn")
    a = ap.parse_args()
    ints = lambda s: [int(x) for x in s.split(",") if x]
    out = Tee(a.csv)
    header(out)
    print("impl,pass,hdim,seqlen,causal,batch,heads,ms,tflops", file=out, flush=True)
    torch.manual_seed(0)
    backends = {"sdpa_flash": SDPBackend.FLASH_ATTENTION, "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION}
    for d, n, b, h, q, k, v in grid_qkv(ints(a.hdims), ints(a.seqlens)):
        for causal in ints(a.causal):
            impls = {"flashattn": lambda q, k, v, c: flashattn.flash_attn_func(q, k, v, causal=bool(c)),
                     # deterministic=True: the backward's fixed dQ summation order
                     "flashattn_det": lambda q, k, v, c: flashattn.flash_attn_func(
                         q, k, v, causal=bool(c), deterministic=True)}
            for name, be in backends.items():
                def fn(q, k, v, c, be=be):
                    with sdpa_kernel([be]):
                        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                           v.transpose(1, 2), is_causal=bool(c))
                    return o.transpose(1, 2)
                impls[name] = fn
            for name in a.impls.split(","):
                fn = impls[name]
                for mode in a.passes.split(","):
                    try:
                        if mode == "fwd":
                            f = lambda: fn(q, k, v, causal)
                        else:
                            o = fn(q, k, v, causal)
                            g = torch.randn_like(o)
                            f = lambda: torch.autograd.grad(o, (q, k, v), g, retain_graph=True)
                        ms = median_ms(f, repeat=30)
                        tf = flops(b, h, n, d, causal, mode) / ms / 1e9
                        print(f"{name},{mode},{d},{n},{causal},{b},{h},{ms:.4f},{tf:.1f}", file=out, flush=True)
                    except Exception as e:  # a peer without this shape: record, go on
                        print(f"{name},{mode},{d},{n},{causal},{b},{h},nan,nan  # {type(e).__name__}: {str(e)[:100]}",
                              file=out, flush=True)


if __name__ == "__main__":
    main()
