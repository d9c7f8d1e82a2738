"""Per-call overhead of the Python layer over the C ABI, in microseconds.

    FLASHATTN_LIBRARY=build/src/libflashattn.so PYTHONPATH=python \\
        python python/benchmarks/call_overhead.py [--device cpu|cuda]

For one tiny problem (batch 1, seqlen 1, 1 head, head_dim 64) it times:
  raw       fa_forward through ctypes on prebuilt argument structs: the kernel
            plus the C-side checks plus one ctypes round trip (the floor);
  reject    fa_forward on prebuilt args that fail validation (null q):
            ctypes round trip + C checks, no kernel;
  numpy     flashattn.numpy.forward;
  op        torch.ops.flashattn.fwd (the custom op, dispatcher included);
  attention flashattn.attention (the public torch function; eager fast path),
            plain, under inference_mode, and with requires_grad inputs;
  autograd  attention forward + backward with requires_grad inputs, next to
            the two implementation functions called back to back;
  via op    the same with the eager fast path off (FLASHATTN_EAGER_FAST_PATH=0);
and reports each wrapper's overhead = its time - raw.  CUDA timings
synchronise once per batch of calls, so they measure host-side cost (the
launch path), which is what overhead is.
"""

import argparse
import ctypes
import importlib
import statistics
import time

import numpy as np

import flashattn
from flashattn import _capi


def bench(fn, number, repeat=7):
    fn()
    best = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best.append((time.perf_counter() - t0) / number * 1e6)
    return statistics.median(best)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--number", type=int, default=2000)
    a = ap.parse_args()
    n = a.number
    print(f"libflashattn {flashattn.library_version()} at {flashattn.library_path()}")
    shape = (1, 1, 1, 64)
    rows = {}

    lib = _capi.lib()
    if a.device == "cpu":
        q = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        out = np.empty_like(q)
        lse = np.empty((1, 1, 1), np.float32)
        t = lambda x: _capi.make_tensor(x.ctypes.data, _capi.FA_F32, _capi.FA_CPU, 0, x.shape,  # noqa: E731
                                        [s // 4 for s in x.strides])
        fargs = _capi.ForwardArgs(t(q), t(q), t(q), t(out), t(lse), _capi.make_options())
        ref = ctypes.byref(fargs)
        rows["raw"] = bench(lambda: lib.fa_forward(ref), n)
        bad = _capi.ForwardArgs(fargs.q, fargs.k, fargs.v, fargs.out, fargs.lse, fargs.options)
        bad.q.data = None
        bref = ctypes.byref(bad)
        assert lib.fa_forward(bref) == _capi.FA_ERR_INVALID_ARGUMENT
        rows["reject"] = bench(lambda: lib.fa_forward(bref), n)
        import flashattn.numpy as fanp

        rows["numpy"] = bench(lambda: fanp.forward(q, q, q), n)

    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        importlib.import_module("flashattn._torch_ops")  # registers torch.ops.flashattn.*

        dev = torch.device(a.device)
        dt = torch.float32 if a.device == "cpu" else torch.bfloat16
        x = torch.randn(shape, device=dev, dtype=dt)
        sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
        if a.device == "cuda":
            # raw on CUDA: prebuilt structs, current stream.
            out = torch.empty_like(x)
            lse = torch.empty(1, 1, 1, device=dev)
            code = _capi.FA_BF16
            t = lambda y, c=code: _capi.make_tensor(y.data_ptr(), c, _capi.FA_CUDA, dev.index or 0,  # noqa: E731
                                                    y.shape, y.stride())
            fargs = _capi.ForwardArgs(t(x), t(x), t(x), t(out), t(lse, _capi.FA_F32),
                                      _capi.make_options(stream=torch.cuda.current_stream().cuda_stream))
            ref = ctypes.byref(fargs)
            rows["raw"] = bench(lambda: lib.fa_forward(ref), n)
            sync()
            bad = _capi.ForwardArgs(fargs.q, fargs.k, fargs.v, fargs.out, fargs.lse, fargs.options)
            bad.q.data = None
            bref = ctypes.byref(bad)
            rows["reject"] = bench(lambda: lib.fa_forward(bref), n)

        tops = importlib.import_module("flashattn._torch_ops")
        op = torch.ops.flashattn.fwd
        rows["op"] = bench(lambda: op(x, x, x, 0.0, False, -1, -1, 0.0, False), n)
        rows["attention"] = bench(lambda: flashattn.attention(x, x, x), n)
        with torch.inference_mode():
            rows["attention (inference_mode)"] = bench(lambda: flashattn.attention(x, x, x), n)
        sync()
        xg = x.clone().requires_grad_()
        rows["attention (requires_grad)"] = bench(lambda: flashattn.attention(xg, xg, xg), n)
        o, lse = op(x, x, x, 0.0, False, -1, -1, 0.0, False)
        rows["raw fwd+bwd (impls)"] = bench(lambda: (tops._fwd_impl(x, x, x, 0.0, False, -1, -1, 0.0, False),
                                                     tops._bwd_impl(o, x, x, x, o, lse, 0.0, False, -1, -1, 0.0, False)), n)

        def fb():
            out = flashattn.attention(xg, xg, xg)
            out.backward(out)

        rows["fwd+bwd autograd"] = bench(fb, max(n // 4, 1))
        tops.EAGER_FAST_PATH = False
        rows["attention via op"] = bench(lambda: flashattn.attention(x, x, x), n)
        rows["fwd+bwd autograd via op"] = bench(fb, max(n // 4, 1))
        tops.EAGER_FAST_PATH = True
        sync()

    raw = rows.get("raw")
    print(f"device {a.device}, shape {shape}, median of 7 x {n} calls")
    for k, v in rows.items():
        extra = ""
        if raw is not None and k in ("numpy", "op", "attention", "attention (inference_mode)",
                                     "attention (requires_grad)", "attention via op"):
            extra = f"   overhead vs raw: {v - raw:7.2f} us"
        print(f"  {k:18s} {v:8.2f} us{extra}")


if __name__ == "__main__":
    main()
